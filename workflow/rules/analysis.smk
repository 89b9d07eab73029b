# A run whose need is over analysis.memory_gb is analysed in parts of whole ranks (one job
# each, spread by the SLURM profile as the sweep is), then put together by analyze_run.
checkpoint plan_analysis:
    input:
        **store_files(RUN_DIR),
    output:
        plan=f"{RUN_DIR}/analysis-parts/plan.json",
    log:
        f"{RESULTS}/logs/analyze/{{run_id}}.plan.log",
    benchmark:
        f"{RESULTS}/benchmarks/analyze/{{run_id}}.plan.tsv"
    conda:
        "../../envs/analysis.yaml"
    params:
        settings=config["analysis"],
    script:
        "../scripts/plan_analysis.py"


rule analyze_part:
    input:
        **store_files(RUN_DIR),
        plan=f"{RUN_DIR}/analysis-parts/plan.json",
    output:
        part=temp(directory(f"{RUN_DIR}/analysis-parts/part-{{index}}")),
    log:
        f"{RESULTS}/logs/analyze/{{run_id}}.part-{{index}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/analyze/{{run_id}}.part-{{index}}.tsv"
    wildcard_constraints:
        index=r"\d{4}",
    conda:
        "../../envs/analysis.yaml"
    resources:
        mem_mb=part_mem_mb,
        mem_mb_per_cpu=part_mem_mb,
    params:
        settings=config["analysis"],
    script:
        "../scripts/analyze_part.py"


rule analyze_run:
    input:
        unpack(analysis_inputs),
    output:
        **analysis_files(RUN_DIR),
    log:
        f"{RESULTS}/logs/analyze/{{run_id}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/analyze/{{run_id}}.tsv"
    conda:
        "../../envs/analysis.yaml"
    resources:
        # the run's own need, counted from its store (in parts: putting them together's,
        # counted from their results); per CPU too,
        # since the SLURM profile's default mem_mb_per_cpu would otherwise be what sbatch is
        # given
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
