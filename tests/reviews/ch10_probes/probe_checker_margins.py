"""Margins of chapter 10's checkers (after the section-4 fixes): for every case and named
mistake, the distance between the mistake and the reference (a mistake is only named where it
is > atol, so a correct answer can be confused with it only if that distance is < 2 atol), and
the error of float32 variants against atol."""
import torch

torch.set_num_threads(1)
from unittest import mock

import mtlib.exercises.ch10 as c
from tests import test_exercises_ch10 as t

seen = {}


def spy(checker, fn, cases, reference, atol=1e-5, mistakes=None):
    seen[checker] = (cases, reference, atol, mistakes)


with mock.patch.object(c, "_check", spy):
    for name in ("check_top_k_probs", "check_min_p_probs", "check_top_p_probs", "check_causal_lm_loss"):
        getattr(c, name)(lambda *a: None)
for checker, (cases, ref, atol, mistakes) in seen.items():
    print(f"== {checker} (atol {atol:g})")
    for n, case in enumerate(cases, 1):
        r = ref(*case.args)
        row = []
        for hint, m in mistakes.items():
            try:
                w = m(*case.args)
            except RuntimeError:
                row.append("skip")
                continue
            d = (w - r).abs()
            d = torch.where(torch.isnan(d), torch.full_like(d, float("inf")), d).max().item()
            row.append("0" if d == 0 else f"{d:.2g}")
        print(f"  case {n}: {' | '.join(row)}")
    small = [k for k in mistakes]
print("float32 variants, largest error per case:")
for checker, good in (("check_top_k_probs", t.good_top_k_float32), ("check_min_p_probs", t.good_min_p_float32),
                      ("check_causal_lm_loss", t.good_loss_float32)):
    cases, ref, atol, _ = seen[checker]
    errs = [(good(*cs.args).double() - ref(*cs.args)).abs().max().item() for cs in cases]
    print(f"  {checker}: {', '.join(f'{e:.2g}' for e in errs)} (atol {atol:g})")
