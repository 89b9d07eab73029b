rule analyze_run:
    input:
        store=f"{RESULTS}/runs/{{run_id}}/store/run.json",
    output:
        f"{RESULTS}/runs/{{run_id}}/analysis/summary.json",
    log:
        f"{RESULTS}/logs/analyze/{{run_id}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/analyze/{{run_id}}.tsv"
    conda:
        "../../envs/analysis.yaml"
    params:
        settings=config["analysis"],
    script:
        "../scripts/analyze_run.py"


rule analyze_sweep:
    input:
        summaries=expand(
            f"{RESULTS}/runs/{{run_id}}/analysis/summary.json", run_id=RUN_IDS
        ),
    output:
        f"{RESULTS}/sweep/sweep.csv",
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
