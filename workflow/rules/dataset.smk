# The datasets, each made once and read by every point of its workload.
rule prepare_dataset:
    output:
        f"{RESULTS}/datasets/mnist/dataset.json",
    log:
        f"{RESULTS}/logs/prepare_dataset.log",
    benchmark:
        f"{RESULTS}/benchmarks/prepare_dataset.tsv"
    conda:
        "../../envs/analysis.yaml"
    params:
        source=config["dataset"]["source"],
        seed=config["dataset"]["seed"],
        train_size=config["dataset"]["train_size"],
        test_size=config["dataset"]["test_size"],
        url=config["dataset"]["url"],
        npz_copies=max_ranks("tensorflow", "mnist"),
    script:
        "../scripts/prepare_dataset.py"


# Bad input (no images, no such directory) does not fail the rule: dataset.json says
# `status: failed` and why, and every ImageNet-style point is reported failed with that reason.
rule prepare_imagenet:
    output:
        f"{RESULTS}/datasets/imagenet/dataset.json",
    log:
        f"{RESULTS}/logs/prepare_imagenet.log",
    benchmark:
        f"{RESULTS}/benchmarks/prepare_imagenet.tsv"
    conda:
        "../../envs/analysis.yaml"
    threads: 8  # capped at the cores there are
    params:
        **config["dataset"]["imagenet"],
    script:
        "../scripts/prepare_imagenet.py"


# A workload of the user's: its `prepare` command run once, or its `data` described. A
# prepare that fails does not fail the rule: dataset.json says why, and every point of that
# workload is reported failed with that reason while the rest of the sweep goes on.
rule prepare_workload:
    output:
        f"{RESULTS}/datasets/{{workload}}/dataset.json",
    log:
        f"{RESULTS}/logs/prepare_workload/{{workload}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/prepare_workload/{{workload}}.tsv"
    wildcard_constraints:
        workload=USER_WORKLOADS_RE,
    conda:
        "../../envs/analysis.yaml"
    params:
        definition=lambda wildcards: config["workloads"][wildcards.workload],
    script:
        "../scripts/prepare_workload.py"
