# One training job per sweep point and repeat; one rule per framework so each has its env.
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
        threads: lambda wildcards: point(wildcards).ranks
        resources:
            nodes=lambda wildcards: point(wildcards).nodes,
            tasks=slurm_tasks,
            tasks_per_node=slurm_tasks_per_node,
            cpus_per_task=config["training"]["threads_per_rank"],
            mpi=slurm_mpi,
            runtime=max(1, config["training"]["timeout"] // 60 + 5),
            mem_mb_per_cpu=2000,
        params:
            run_id=lambda wildcards: wildcards.run_id,
        script:
            "../scripts/train.py"
