"""Notebook 06's hidden tests: Lab Task 3 and 11.6(c) on inputs the student never saw, and the student's own numbers
of 11.4(c), 11.4(d) and 11.9(d) against their exact values."""
from __future__ import annotations

import numpy as np
import torch

from lmpolicy.exact import kl as library_kl
from lmpolicy.exercises.nb06 import (BATCH_ESTIMATE_NAMES, BATCH_ESTIMATES, DEMO_READINGS, ESTIMATOR_GRADIENTS,
                                     ESTIMATOR_VALUE_NAMES, ESTIMATOR_VALUES, KL_ESTIMATORS, check_gradients,
                                     check_kl_estimators, numbers)
from lmpolicy.notebook.checks import check, check_close, check_variant_answers
from lmpolicy.per_student import variants
from lmpolicy.per_student.hidden_inputs import hidden_seed


def kl_estimators(student_kl_estimators) -> None:
    rng = np.random.default_rng(hidden_seed(5))
    random_pairs = []
    for vocab in (2, 7, 50):
        p, q = rng.dirichlet(np.ones(vocab)), rng.dirichlet(np.ones(vocab))
        random_pairs.append((p, q, library_kl.estimator_moments(p, q)))  # computed before the shortcuts are blocked

    with KL_ESTIMATORS.blocked():
        # random shapes, float32 and float64, batch of one
        for seed, shape in enumerate([(1, 1), (4, 6), (2, 3, 5), (32,)]):
            generator = torch.Generator().manual_seed(hidden_seed(300 + seed))
            dtype = torch.float32 if seed % 2 else torch.float64
            logp = -3 * torch.rand(shape, generator=generator, dtype=dtype)
            ref_logp = -3 * torch.rand(shape, generator=generator, dtype=dtype)
            k1, k2, k3 = check_kl_estimators(student_kl_estimators, logp, ref_logp, f"random {shape}")
            check(bool((k2 >= 0).all()) and bool((k3 >= -1e-6).all()),
                  "k2 and k3 must never be negative (k3 = u - 1 - log u >= 0 since log u <= u - 1)")
        # equal distributions: every estimator is exactly 0; a very sharp and a very flat token stay finite
        k1, k2, k3 = check_kl_estimators(student_kl_estimators, torch.full((3,), -1.2, dtype=torch.float64),
                                         torch.full((3,), -1.2, dtype=torch.float64), "equal log-probs")
        check(bool((k3.abs() < 1e-12).all()), "k3 must be exactly 0 when pi_theta = pi_ref")
        check_kl_estimators(student_kl_estimators, torch.tensor([-1e-4, -25.0], dtype=torch.float64),
                            torch.tensor([-20.0, -1e-4], dtype=torch.float64), "extreme log-ratios")
        # exact means under random distributions agree with the exact solver
        for p, q, moments in random_pairs:
            vocab = len(p)
            estimates = check_kl_estimators(student_kl_estimators, torch.tensor(np.log(p)), torch.tensor(np.log(q)),
                                            f"a random {vocab}-token pair")
            for name, value in zip(("k1", "k2", "k3"), estimates):
                check_close(float(p @ value.detach().numpy()), moments.mean[name],
                            f"the mean of {name} under pi_theta ({vocab} tokens)", atol=1e-8)
        # gradients flow: d k3 / d logp = 1 - exp(-l)
        logp = torch.tensor([-0.5, -2.0], dtype=torch.float64, requires_grad=True)
        ref_logp = torch.tensor([-1.0, -1.0], dtype=torch.float64)
        k1, k2, k3 = check_kl_estimators(student_kl_estimators, logp, ref_logp, "log-probs that require grad")
        check(k3.requires_grad, "k3 carries no gradient: compute it with torch operations, no .item() or numpy")
        k3.sum().backward()
        check_close(logp.grad, 1 - torch.exp(-(logp.detach() - ref_logp)), "the gradient of k3 with respect to logp")


def estimator_values(namespace) -> None:
    # the student's own model's seven numbers from the exact estimator moments (the chapter's without a student id)
    check_variant_answers(ESTIMATOR_VALUES.key, numbers(namespace, ESTIMATOR_VALUE_NAMES))


def batch_estimates(namespace) -> None:
    # the student's own model's four numbers from the exact estimator values (the chapter's without a student id)
    check_variant_answers(BATCH_ESTIMATES.key, numbers(namespace, BATCH_ESTIMATE_NAMES))


def estimator_gradients(student_expected_estimator_gradients, student_reverse_kl_gradient,
                        student_forward_kl_gradient, namespace) -> None:
    with ESTIMATOR_GRADIENTS.blocked():
        rng = np.random.default_rng(hidden_seed(11))
        for vocab in (2, 3, 6, 15):
            theta = torch.tensor(rng.normal(0, 1.5, vocab))
            ref_probs = torch.tensor(rng.dirichlet(np.ones(vocab)))
            (g1, g2, g3), reverse_fd, forward_fd = check_gradients(
                student_expected_estimator_gradients, student_reverse_kl_gradient, student_forward_kl_gradient,
                theta, ref_probs)
            # independent closed forms: grad KL(p || q) = p * (l - KL), grad KL(q || p) = p - q, for p = softmax(theta)
            p = torch.softmax(theta, -1)
            log_ratio = (p / ref_probs).log()
            closed_reverse = p * (log_ratio - (p * log_ratio).sum())
            check_close(reverse_fd, closed_reverse, "the finite-difference check itself", atol=1e-6)
            check_close(g1, torch.zeros(vocab), f"g1 (E[grad k1]) for {vocab} tokens", atol=1e-9,
                        hint="differentiate k1 with the sampled token fixed and weight by pi_theta, not differentiated")
            check_close(g2, closed_reverse, f"g2 (E[grad k2]) for {vocab} tokens", atol=1e-9)
            check_close(g3, p - ref_probs, f"g3 (E[grad k3]) for {vocab} tokens", atol=1e-9)
        expected_answers = {"k1_loss_gives": "zero", "k2_loss_gives": "reverse KL", "k3_loss_gives": "forward KL"}
        for name, wanted in expected_answers.items():
            check(namespace.get(name) == wanted, f"{name} is not right: compare your g's with the two KL gradients")


def demo_readings(namespace, smallest_std, smaller_std_of_k1_k3) -> None:
    # the student's own setting's exact KL and exact share below it (the chapter's without a student id): the share
    # within 0.04
    check_variant_answers(DEMO_READINGS.key, submitted=numbers(namespace, ("true_kl", "fraction_k3_below_kl")),
                          hint="after a few thousand batches the demo's share is within a couple of points of the truth")
    expected = variants.answer(DEMO_READINGS.key)
    check(smallest_std == expected["smallest_std"], "smallest_std is not the estimator with the smallest spread")
    check(smaller_std_of_k1_k3 == expected["smaller_std_of_k1_k3"], "smaller_std_of_k1_k3 is not right")
