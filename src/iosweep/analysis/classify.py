"""File classes (dataset, checkpoint, other, ...) from ordered path rules: first match wins."""

from __future__ import annotations

import re

import numpy as np

from iosweep.analysis.settings import OTHER, AnalysisSettings


def classify_path(path: str, settings: AnalysisSettings) -> str:
    for rule in settings.file_classes:
        if re.search(rule["pattern"], path):
            return rule["name"]
    return OTHER


def classify_paths(paths: list[str], settings: AnalysisSettings) -> np.ndarray:
    """Class code (index into ``settings.class_names``) of each path."""
    names = settings.class_names
    rules = [(re.compile(r["pattern"]), names.index(r["name"])) for r in settings.file_classes]
    out = np.full(len(paths), names.index(OTHER), np.int8)
    for i, p in enumerate(paths):
        for rx, code in rules:
            if rx.search(p):
                out[i] = code
                break
    return out
