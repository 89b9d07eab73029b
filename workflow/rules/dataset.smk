rule prepare_dataset:
    output:
        f"{RESULTS}/dataset/dataset.json",
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
        npz_copies=max_ranks("tensorflow"),
    script:
        "../scripts/prepare_dataset.py"
