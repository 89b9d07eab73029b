rule report:
    input:
        sweep=rules.analyze_sweep.output[0],
        summaries=rules.analyze_sweep.input.summaries,
    output:
        html=REPORT_HTML,
    log:
        f"{RESULTS}/logs/report.log",
    benchmark:
        f"{RESULTS}/benchmarks/report.tsv"
    conda:
        "../../envs/analysis.yaml"
    params:
        report=config["report"],
        config=config,
    script:
        "../scripts/report.py"
