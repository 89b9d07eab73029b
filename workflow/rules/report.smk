# The last rule: the HTML report, and its figures registered with Snakemake's own report
# (`snakemake --report report.zip`). Captions: report/captions/; logic: iosweep.report.
report: "../../report/workflow.rst"


FIGURES = f"{RESULTS}/report/figures"


# The tune's ledger is an input where the config asks for a tune: its own section.
rule report:
    input:
        **rules.analyze_sweep.output,
        **({"ledger": TUNE_LEDGER} if TUNE else {}),
        summaries=rules.analyze_sweep.input.summaries,
        tables=expand(
            list(analysis_files(RUN_DIR).values()),
            run_id=RUN_IDS,
        ),
        # the tune's ledger, where the config asks for a tune: its own section
    output:
        html=report(
            REPORT_HTML,
            caption="../../report/captions/report.rst",
            category="1. Report",
            labels={"file": "report.html"},
        ),
        figures_index=f"{FIGURES}/figures.json",
        sweep_figures=report(
            directory(f"{FIGURES}/sweep"),
            patterns=["{figure}.png"],
            caption="../../report/captions/sweep.rst",
            category="2. Sweep comparison",
            labels={"figure": "{figure}"},
        ),
        framework_figures=report(
            directory(f"{FIGURES}/frameworks"),
            patterns=["{figure}.png"],
            caption="../../report/captions/frameworks.rst",
            category="3. Frameworks side by side",
            labels={"figure": "{figure}"},
        ),
        run_figures=report(
            directory(f"{FIGURES}/runs"),
            patterns=["{run}/{figure}.png"],
            caption="../../report/captions/run.rst",
            category="4. Runs",
            subcategory="{run}",
            labels={"run": "{run}", "figure": "{figure}"},
        ),
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
