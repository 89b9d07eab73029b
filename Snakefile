# iosweep: sweep instrumented Horovod training over scale and compare its I/O.
# Thin on purpose: config and validation here, one rule file per stage, logic in src/iosweep.
from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


include: "workflow/rules/common.smk"


wildcard_constraints:
    run_id=r"(framework|external)~[^/]+(/[a-z_]+~[^/]+)*",


include: "workflow/rules/dataset.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/ingest.smk"
include: "workflow/rules/analysis.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/replay.smk"
include: "workflow/rules/tune.smk"


onsuccess:
    show_answers()


rule all:
    default_target: True
    input:
        REPORT_HTML,
        [TUNE_LEDGER] if TUNE else [],
        (
            [f"{RUN_DIR.format(run_id=r)}/store/merged-log.txt" for r in RUN_IDS]
            if config["ingest"]["merged_log"]
            else []
        ),
