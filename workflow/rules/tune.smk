# Tune the input pipeline (config: tune): a chain of checkpoints, one per point measured.
# Step K reads the runs of the point step K-1 chose (step 0: the start), records them in the
# ledger and chooses the next point, or stops; the ledger rule follows the chain to its end.
# Logic: iosweep.tune.
TUNE_STEP = f"{RESULTS}/tune/steps/step~{{step}}.json"


checkpoint tune_step:
    input:
        unpack(tune_step_inputs),
    output:
        ledger=TUNE_STEP,
    log:
        f"{RESULTS}/logs/tune/step~{{step}}.log",
    wildcard_constraints:
        step=r"\d+",
    conda:
        "../../envs/analysis.yaml"
    params:
        analysis=config["analysis"],
    script:
        "../scripts/tune_step.py"


rule tune_ledger:
    input:
        unpack(tune_chain),
    output:
        ledger=TUNE_LEDGER,
    log:
        f"{RESULTS}/logs/tune/ledger.log",
    conda:
        "../../envs/analysis.yaml"
    script:
        "../scripts/tune_ledger.py"
