rule analyze_run:
    input:
        **store_files(RUN_DIR),
    output:
        **analysis_files(RUN_DIR),
    log:
        f"{RESULTS}/logs/analyze/{{run_id}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/analyze/{{run_id}}.tsv"
    conda:
        "../../envs/analysis.yaml"
    resources:
        # the run's own need, counted from its store; per CPU too, since the SLURM
        # profile's default mem_mb_per_cpu would otherwise be what sbatch is given
        mem_mb=analysis_mem_mb,
        mem_mb_per_cpu=analysis_mem_mb,
    params:
        settings=config["analysis"],
    script:
        "../scripts/analyze_run.py"


rule analyze_sweep:
    input:
        summaries=expand(
            analysis_files(RUN_DIR)["summary"],
            run_id=RUN_IDS,
        ),
    output:
        **sweep_files(),
    log:
        f"{RESULTS}/logs/analyze_sweep.log",
    benchmark:
        f"{RESULTS}/benchmarks/analyze_sweep.tsv"
    conda:
        "../../envs/analysis.yaml"
    params:
        settings=config["analysis"],
    script:
        "../scripts/analyze_sweep.py"
