rule ingest_run:
    input:
        manifest=f"{RESULTS}/runs/{{run_id}}/manifest.json",
        parts=ingest_part_dirs,
    output:
        **store_files(RUN_DIR),
    log:
        f"{RESULTS}/logs/ingest/{{run_id}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/ingest/{{run_id}}.tsv"
    wildcard_constraints:
        run_id=r"framework~.+",
    conda:
        "../../envs/analysis.yaml"
    resources:
        # counted from the logs: the SLURM profile's default would be a guess
        mem_mb=ingest_mem_mb,
        mem_mb_per_cpu=ingest_mem_mb,
    params:
        memory_gb=config["analysis"]["memory_gb"],
    script:
        "../scripts/ingest.py"


# Darshan logs the workflow did not produce (config: ingest.runs).
rule ingest_external:
    input:
        parts=ingest_part_dirs,
    output:
        **store_files(f"{RESULTS}/runs/external~{{name}}"),
    log:
        f"{RESULTS}/logs/ingest/external~{{name}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/ingest/external~{{name}}.tsv"
    conda:
        "../../envs/analysis.yaml"
    resources:
        mem_mb=ingest_mem_mb,
        mem_mb_per_cpu=ingest_mem_mb,
    params:
        logs=lambda wildcards: config["ingest"]["runs"][wildcards.name]["logs"],
        manifest=lambda wildcards: config["ingest"]["runs"][wildcards.name].get(
            "manifest"
        ),
        labels=lambda wildcards: config["ingest"]["runs"][wildcards.name].get(
            "params", {}
        ),
        memory_gb=config["analysis"]["memory_gb"],
    script:
        "../scripts/ingest.py"


# The run's merged Darshan log, only when asked (config: ingest.merged_log): nothing waits
# for it. Its record says what was written (a run with no per-process Darshan log has none).
rule merged_log:
    input:
        meta=f"{RUN_DIR}/store/run.json",
    output:
        record=f"{RUN_DIR}/store/merged-log.txt",
    log:
        f"{RESULTS}/logs/merge/{{run_id}}.log",
    conda:
        "../../envs/analysis.yaml"
    script:
        "../scripts/merge.py"


# One part of a run's logs (config: ingest.parts > 1), read by a job of its own; the run's
# ingest job puts the parts together (iosweep.trace.ingest.inparts).
rule ingest_part:
    input:
        unpack(ingest_part_inputs),
    output:
        part=temp(directory(f"{RUN_DIR}/ingest-parts/part-{{part}}")),
    log:
        f"{RESULTS}/logs/ingest/{{run_id}}.part-{{part}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/ingest/{{run_id}}.part-{{part}}.tsv"
    wildcard_constraints:
        part=r"\d{4}",
    conda:
        "../../envs/analysis.yaml"
    resources:
        mem_mb=ingest_mem_mb,
        mem_mb_per_cpu=ingest_mem_mb,
    params:
        logs=ingest_logs,
        parts=config["ingest"]["parts"],
        store=lambda wildcards: f"{RESULTS}/runs/{wildcards.run_id}/store",
        memory_gb=config["analysis"]["memory_gb"],
    script:
        "../scripts/ingest_part.py"
