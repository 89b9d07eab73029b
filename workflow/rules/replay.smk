# A DLIO workload that replays a measured run (docs/replay.md). Not in the default target:
# ask for it, e.g. snakemake results/runs/<run id>/replay/workload/dlio.yaml
rule replay_workload:
    input:
        summary=analysis_files(RUN_DIR)["summary"],
        meta=store_files(RUN_DIR)["meta"],
    output:
        workload=f"{RUN_DIR}/replay/workload/dlio.yaml",
        data=directory(f"{RUN_DIR}/replay/dlio-data"),
    log:
        f"{RESULTS}/logs/replay/{{run_id}}.log",
    conda:
        "../../envs/analysis.yaml"
    script:
        "../scripts/replay.py"
