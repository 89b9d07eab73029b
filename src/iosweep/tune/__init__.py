"""Prove the lever: run the point the rate model predicts the most from, measure it with
repeats, keep it or not, and go on (``iosweep tune``; the workflow's ``tune_step``
checkpoints and ``tune_ledger`` rule). A stage above the run and the analysis: it reads the
analyses of the runs it asked for and decides the next; it never imports into them.

``points``: the start point, the run ids, the levers a job exposes. ``steps``: one step's
measurement and decision. ``ledger``: the ledger file and one workflow step."""
