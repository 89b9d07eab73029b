# One training job per sweep point and repeat; one rule per framework so each has its env.
localrules:
    train_pytorch,
    train_tensorflow,


for framework in ("pytorch", "tensorflow"):

    rule:
        name:
            f"train_{framework}"
        input:
            dataset=dataset_json,
        output:
            manifest=f"{RESULTS}/runs/{{run_id}}/manifest.json",
        log:
            f"{RESULTS}/logs/train/{{run_id}}.log",
        benchmark:
            f"{RESULTS}/benchmarks/train/{{run_id}}.tsv"
        wildcard_constraints:
            run_id=rf"framework~{framework}/.+",
        conda:
            f"../../envs/{framework}.yaml"
        # Locally a run holds every core it is given: a job beside it (another run, an
        # analysis) would take cores from it and change what it measures. Under --profile
        # slurm the runner stays on the submit host and holds the point's nodes with salloc:
        # a job that loses a node still gets its manifest (status lost).
        threads: lambda wildcards: 1 if workflow.non_local_exec else os.cpu_count()
        # A resource, not a param: how the workflow runs must not make finished points stale.
        resources:
            slurm_allocate=lambda wildcards: int(workflow.non_local_exec),
        params:
            run_id=lambda wildcards: wildcards.run_id,
            workload=workload_definition,
        script:
            "../scripts/train.py"
