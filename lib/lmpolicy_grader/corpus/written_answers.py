"""Example written answers, as students write them, for the manually graded Markdown cells of ch11.

The source notebooks hold the mark scheme in those cells; an example submission that handed it in would make
the manual-grading walkthrough of docs/instructors.md pointless (every answer a model answer, under a
"BEGIN SOLUTION" heading). So each written exercise has three answers of different quality, written the way
a student would write them: ``good`` (full marks by the mark scheme), ``partial`` (about half: one step
right, the other missing or hand-waved) and ``wrong`` (a confident misunderstanding, or next to nothing).
``lmpolicy_grader.class_grading.examples_course`` gives ``reference`` the good ones, ``mistakes`` the partial ones and
``mistakes-2`` ... the wrong ones.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class WrittenAnswer:
    notebook: str  # e.g. "01_policy_softmax" (source/ch11/<notebook>.ipynb)
    cell: str      # grade_id of the manually graded Markdown cell
    good: str      # full marks by the mark scheme
    partial: str   # about half the points
    wrong: str     # no points: a misunderstanding or an answer that says almost nothing


QUALITIES = ("good", "partial", "wrong")

WRITTEN_ANSWERS: list[WrittenAnswer] = [
    WrittenAnswer(
        "01_policy_softmax", "ex11_1b__manual",
        good=r"""The chain rule says a joint probability factors into conditionals, one variable at a time:
$P(y_1, \dots, y_n \mid x) = P(y_1 \mid x)\, P(y_2 \mid x, y_1) \cdots P(y_n \mid x, y_1, \dots, y_{n-1})$
(apply $P(A, B \mid x) = P(A \mid x) P(B \mid A, x)$ again and again).
The language model comes in here: its next-token distribution *is* each of these conditionals, so
$\pi(y \mid x) = \prod_t \pi(y_t \mid x, y_{<t})$. Every factor is positive (softmax), so taking logs turns the
product into the sum $\sum_t \log \pi(y_t \mid x, y_{<t})$.""",
        partial=r"""The probability of the whole answer is the product of the probabilities of the tokens, so
$\pi(y \mid x) = \prod_t \pi(y_t)$ and the log of a product is a sum of logs.""",
        wrong=r"""Because log-probabilities add up, like in the code we wrote: `logprobs.sum()`.""",
    ),
    WrittenAnswer(
        "02_temperature", "ex11_2a__manual",
        good=r"""At $T = 1$, $\pi_1(a) = e^{z_a}/Z_1$ with $Z_1 = \sum_b e^{z_b}$. Raising to the power $1/T$:
$\pi_1(a)^{1/T} = e^{z_a/T} / Z_1^{1/T}$. The denominator $Z_1^{1/T}$ is the same number for every token $a$,
so $\pi_1(a)^{1/T} \propto e^{z_a/T}$, and after normalising over $a$ this is exactly $\pi_T(a)$.""",
        partial=r"""$\pi_1(a)^{1/T} = (e^{z_a}/Z_1)^{1/T} = e^{z_a/T}/Z_1^{1/T}$, which is the same as $\pi_T(a)$.""",
        wrong=r"""Dividing the logits by $T$ divides the probabilities by $T$, so $\pi_T = \pi_1 / T$, which is proportional.""",
    ),
    WrittenAnswer(
        "02_temperature", "ex11_2c__manual",
        good=r"""With $Z(\kappa) = \sum_b e^{\kappa z_b}$, $\log \pi_T(a) = \kappa z_a - \log Z$, so
$H = -\sum_a \pi_T(a)(\kappa z_a - \log Z) = \log Z - \kappa\, \mathbb{E}[z]$.

Derivatives: $\frac{d}{d\kappa} \log Z = \frac{1}{Z}\sum_b z_b e^{\kappa z_b} = \mathbb{E}[z]$, and
$\frac{d \pi_T(a)}{d\kappa} = \pi_T(a)(z_a - \mathbb{E}[z])$, hence
$\frac{d \mathbb{E}[z]}{d\kappa} = \sum_a z_a \pi_T(a)(z_a - \mathbb{E}[z]) = \mathbb{E}[z^2] - \mathbb{E}[z]^2 = \mathrm{Var}(z)$.
Putting it together: $\frac{dH}{d\kappa} = \mathbb{E}[z] - \mathbb{E}[z] - \kappa \mathrm{Var}(z) = -\kappa\, \mathrm{Var}(z)$.

Since $\kappa = 1/T$, $\frac{dH}{dT} = \frac{dH}{d\kappa} \cdot \left(-\frac{1}{T^2}\right) = \mathrm{Var}(z)/T^3 \ge 0$.
All tokens have positive probability, so the variance is zero only if every logit is the same; otherwise
entropy strictly increases with $T$.""",
        partial=r"""$H = \log Z - \kappa\, \mathbb{E}[z]$ and $\frac{d}{d\kappa}\log Z = \mathbb{E}[z]$, so differentiating gives
$-\kappa\, \mathrm{Var}(z)$. A variance is never negative, so the derivative is negative and the entropy goes down
with $\kappa$.""",
        wrong=r"""Higher temperature means more randomness, and more randomness means more entropy, so $H$ increases with $T$.""",
    ),
    WrittenAnswer(
        "03_three_stages", "ex11_1c__manual",
        good=r"""It misses the negative signal. With a baseline, a wrong sample gets $r - b < 0$, so its probability is
pushed down directly. Rejection sampling just drops wrong samples (weight 0): it only pushes up the kept ones, and
the mistakes lose probability only indirectly, because the softmax has to sum to one.""",
        partial=r"""Rejection sampling throws away the wrong answers, so it learns from fewer samples and is slower.""",
        wrong=r"""Nothing: both end up raising the probability of the correct answers, so they learn the same thing.""",
    ),
    WrittenAnswer(
        "03_three_stages", "nb03_four_reasons__manual",
        good=r"""1. **Learning from mistakes.** SFT only ever pushes up demonstrations; it never looks at what *this* model
   gets wrong. In RL the model's own answer, e.g. "47+39=76", gets reward 0, and with a baseline its advantage is
   negative, so exactly that token sequence is pushed down.
2. **Judging is easier than demonstrating.** The RL gradient only needs a number per response. For addition a
   checker is one line of code; for "write a function that passes these tests" we can run the tests, while writing
   many good demonstrations would be expensive.
3. **Own distribution.** In SFT every prefix comes from a human, but at generation time the model continues its own
   text. After one odd token it is in a state no demonstration covered and errors pile up. RL samples from the
   model itself, so the gradient is computed on the states it actually visits.
4. **Beyond the demonstrator.** SFT's best case is copying the demonstrations. RL's objective is the reward, so a
   strategy that no demonstration contains (like AlphaGo's moves) is pushed up as soon as the model samples it and
   the reward likes it.""",
        partial=r"""1. RL learns from mistakes because wrong answers get reward 0.
2. It is easier to check an answer than to write one, e.g. checking a sum.
3. The model is trained on its own outputs.
4. RL can become better than the humans who wrote the demonstrations, like AlphaGo.""",
        wrong=r"""RL is better than SFT because it uses rewards, which carry more information than demonstrations, and because
it trains for longer. For TinyLM, RL got a higher accuracy than SFT, which shows it.""",
    ),
    WrittenAnswer(
        "05_tilted_optimum", "ex11_5a__manual",
        good=r"""Lagrangian: $L = \sum_y \pi(y) r(y) - \beta \sum_y \pi(y)[\log \pi(y) - \log \pi_\text{ref}(y)] + \lambda(1 - \sum_y \pi(y))$.
Setting $\partial L / \partial \pi(y) = 0$: $r(y) - \beta[\log \pi(y) + 1 - \log \pi_\text{ref}(y)] - \lambda = 0$, so
$\log \pi(y) = \log \pi_\text{ref}(y) + r(y)/\beta - 1 - \lambda/\beta$ and
$\pi(y) = \pi_\text{ref}(y)\, e^{r(y)/\beta} \cdot e^{-1-\lambda/\beta}$.
The last factor is the same for all $y$; $\sum_y \pi(y) = 1$ forces it to be $1/Z$ with
$Z = \sum_y \pi_\text{ref}(y) e^{r(y)/\beta}$.

Why it is the global maximum: $\mathbb{E}_\pi[r]$ is linear in $\pi$ and the KL is convex in $\pi$, so the objective is
concave on the simplex, and for a concave function a stationary point is the global maximum.""",
        partial=r"""Differentiating $\sum_y \pi(y) r(y) - \beta \sum_y \pi(y) \log\frac{\pi(y)}{\pi_\text{ref}(y)} - \lambda \sum_y \pi(y)$ gives
$r(y) - \beta \log\frac{\pi(y)}{\pi_\text{ref}(y)} - \beta - \lambda = 0$, so $\pi(y) \propto \pi_\text{ref}(y) e^{r(y)/\beta}$ and we divide by $Z$.
It is a maximum because the second derivative is negative.""",
        wrong=r"""The best policy puts all its probability on the response with the highest reward, and the KL term makes it
stay a bit like $\pi_\text{ref}$, so we multiply them: $\pi^* = \pi_\text{ref} \cdot r / Z$.""",
    ),
    WrittenAnswer(
        "05_tilted_optimum", "ex11_5c__manual",
        good=r"""**$\beta \to \infty$:** $e^{r/\beta} \approx 1 + r/\beta$, so the soft value $V(y_1)$ tends to the average
$\mathbb{E}_{\pi_\text{ref}}[r \mid y_1]$, a finite number, and $V(y_1)/\beta \to 0$. The tilt disappears and
$\pi^*(y_1) \to \pi_\text{ref}(y_1)$.

**$\beta \to 0$:** the soft max turns into a hard max: $V(y_1) \to \max_{y_2} r(y_1 y_2)$ (over continuations the
reference allows). Then $\pi^*(y_1) \propto \pi_\text{ref}(y_1) e^{V(y_1)/\beta}$ puts all its mass on the first token
whose best continuation is best. In the worked example that is $b$: its best continuation earns 2, while the best
after $a$ earns 1. So the first token is judged by the best that can follow it, not by the average.""",
        partial=r"""As $\beta \to \infty$ the KL dominates and $\pi^*$ becomes $\pi_\text{ref}$. As $\beta \to 0$ only the reward
counts, so $\pi^*$ picks the first token with the highest reward, which is $a$ in the example.""",
        wrong=r"""When $\beta \to 0$ we get the reference policy back, and when $\beta \to \infty$ the policy becomes greedy.""",
    ),
    WrittenAnswer(
        "05_tilted_optimum", "ex11_7a__manual",
        good=r"""With $r(y) = \log \pi_\text{ref}(y)$: $\pi_\text{ref}(y)\, e^{r(y)/\beta} = \pi_\text{ref}(y) \cdot \pi_\text{ref}(y)^{1/\beta} = \pi_\text{ref}(y)^{1 + 1/\beta}$,
so $\pi^* \propto \pi_\text{ref}^{1 + 1/\beta}$. This equals $p_T \propto \pi_\text{ref}^{1/T}$ when $1 + 1/\beta = 1/T$, i.e.
$\beta = \frac{T}{1 - T}$, which is positive for $0 < T < 1$ (and $\beta \to \infty$ as $T \to 1$, $\beta \to 0$ as $T \to 0$).""",
        partial=r"""Plugging in the reward gives $\pi^* \propto \pi_\text{ref}^{1 + 1/\beta}$, which is a power of $\pi_\text{ref}$, so it is
the same kind of distribution as $p_T$.""",
        wrong=r"""$\beta = T$, because both control how sharp the distribution is.""",
    ),
    WrittenAnswer(
        "05_tilted_optimum", "ex11_7c__manual",
        good=r"""With $r = \log \pi_\text{ref}$ and $T = 0.5$ ($\beta = 1$), the soft value is
$V(y_1) = \log \sum_{y_2} \pi_\text{ref}(y_2 \mid y_1)\, \pi_\text{ref}(y_1 y_2)$. After $b$ the reference has a single
likely continuation, so $V(b) = \log 0.5$; after $a$ the mass is split between two, so $V(a) = \log 0.25$. Hence $b$
has the larger soft value and $p_T$ moves first-token mass towards $b$ (from 0.5 to 2/3).

Per-token temperature only reshapes the first-token distribution $(0.5, 0.5)$ itself, and any power of it is still
$(0.5, 0.5)$. It cannot look ahead to see that $b$ leads to a confident continuation; the power distribution, being a
tilted optimum, does.""",
        partial=r"""The power distribution prefers $b$ because after $b$ the model is more confident. Per-token temperature
also sharpens the distribution, but it does it token by token.""",
        wrong="",
    ),
    WrittenAnswer(
        "05_tilted_optimum", "ex11_8a__manual",
        good=r"""The reward model was fitted only on comparisons of responses the SFT model produces, so on rare responses
it is extrapolating and no training example ever corrected its mistakes there. Write its score as true reward plus an
error: an optimiser with $\beta = 0$ looks for the highest score anywhere, and among many noisy scores the largest is
most likely one with a big positive error (maximisation bias), so it moves all its mass onto such a response.""",
        partial=r"""The reward model has seen few examples of rare responses, so it is less accurate on them. The optimiser
will find them because it explores.""",
        wrong=r"""The reward model is wrong on rare responses because they are bad responses, and the optimiser avoids them.""",
    ),
    WrittenAnswer(
        "05_tilted_optimum", "ex11_8c__manual",
        good=r"""Two reasons to keep $\beta > 0$: (1) it keeps what the reward does not measure, such as fluency, diversity and
knowledge; as $\beta \to 0$ the optimum collapses onto a single response. (2) Stability: staying near a model that is
known to work avoids strange rollouts and huge gradients (and degenerate text with tiny $\pi_\text{ref}$ costs a lot of KL).

Against it: with a programmatic verifier (unit tests, a maths checker) the reward is hard to fool, and for long
reasoning the policy *should* move far from the SFT model; the KL term only slows that down, which is why recipes
such as DAPO drop it.""",
        partial=r"""Keeping $\beta > 0$ keeps the policy close to the reference, so it keeps writing fluent text. Some recipes
set $\beta = 0$ because it is simpler.""",
        wrong=r"""$\beta > 0$ makes training faster. Recipes set $\beta = 0$ when they have no reference model.""",
    ),
    WrittenAnswer(
        "05_tilted_optimum", "ex11_8d__manual",
        good=r"""The clip keeps $\pi_\theta$ close to $\pi_\text{old}$, the policy that sampled the current batch, so each update
is a small step on data that is still almost on-policy. The KL term keeps it close to $\pi_\text{ref}$, the fixed
starting model, so it limits where training ends up. We want both because the clip alone allows drifting
arbitrarily far in many small steps, and the KL alone does not prevent one destructive update.""",
        partial=r"""The clip keeps the new policy close to the old one and the KL keeps it close to the reference. Both are
useful to keep training stable.""",
        wrong=r"""They both keep $\pi_\theta$ close to the reference model; the clip is just a cheaper approximation of the KL.""",
    ),
    WrittenAnswer(
        "05_tilted_optimum", "ex11_9b__manual",
        good=r"""At the same KL (about 0.08) lowering the temperature earns about 0.41, less even than the reference's 0.58,
while $\pi^*$ earns about 0.89; at the largest $T$ the reward only reaches about 0.70 at KL 0.045, where $\pi^*$
earns about 0.81. Temperature reshapes the distribution using only $\pi_\text{ref}$'s own probabilities and knows
nothing about the reward: lowering $T$ favours "aa", the likeliest response, which earns 0. $\pi^*$ is the best
policy at every KL (Gibbs identity), so everything else, temperature included, lies below its frontier.""",
        partial=r"""Temperature is always below the $\pi^*$ curve: at the same KL it gets less reward. This is because
$\pi^*$ is optimal.""",
        wrong=r"""Temperature and $\pi^*$ give about the same reward, because both make the distribution sharper.""",
    ),
    WrittenAnswer(
        "06_kl_estimators", "ex11_4a__manual",
        good=r"""Let $f(u) = u - 1 - \log u$ for $u > 0$. Then $f'(u) = 1 - 1/u$, negative for $u < 1$ and positive for
$u > 1$, and $f''(u) = 1/u^2 > 0$, so $f$ is strictly convex with its only minimum at $u = 1$, where $f(1) = 0$.
Hence $k_3 = f(u) \ge 0$, with equality only at $u = 1$.""",
        partial=r"""Since $\log u \le u - 1$, we get $u - 1 - \log u \ge 0$.""",
        wrong=r"""$k_3$ is an estimate of a KL divergence and a KL divergence is never negative, so $k_3 \ge 0$.""",
    ),
    WrittenAnswer(
        "06_kl_estimators", "ex11_4b__manual",
        good=r"""By linearity $\mathbb{E}[k_3] = \mathbb{E}[u] - 1 - \mathbb{E}[\log u]$. The last term:
$-\mathbb{E}_{\pi_\theta}[\log u] = \sum_y \pi_\theta(y) \log \frac{\pi_\theta(y)}{\pi_\text{ref}(y)} = \mathrm{KL}(\pi_\theta \Vert \pi_\text{ref})$.
The first: $\mathbb{E}[u] = \sum_{y:\, \pi_\theta(y) > 0} \pi_\theta(y) \frac{\pi_\text{ref}(y)}{\pi_\theta(y)} = \sum_{y:\, \pi_\theta(y) > 0} \pi_\text{ref}(y)$,
which is 1 only if $\pi_\text{ref}$ has no mass where $\pi_\theta$ has none, i.e. the support of $\pi_\text{ref}$ lies inside
the support of $\pi_\theta$ (always true for softmax policies). Then $\mathbb{E}[u] - 1 = 0$ and $\mathbb{E}[k_3] = \mathrm{KL}$.""",
        partial=r"""$\mathbb{E}[u] = \sum_y \pi_\theta(y) \frac{\pi_\text{ref}(y)}{\pi_\theta(y)} = 1$, and $-\mathbb{E}[\log u]$ is the KL,
so $\mathbb{E}[k_3] = 1 - 1 + \mathrm{KL} = \mathrm{KL}$.""",
        wrong=r"""We need the two distributions to be equal, otherwise $u \neq 1$.""",
    ),
    WrittenAnswer(
        "06_kl_estimators", "ex11_6a__manual",
        good=r"""Write $\mathrm{KL} = \sum_y \pi_\theta(y)\, \ell(y)$ with $\ell = \log \pi_\theta - \log \pi_\text{ref}$. The product rule gives
$\nabla \mathrm{KL} = \sum_y \nabla \pi_\theta(y)\, \ell(y) + \sum_y \pi_\theta(y)\, \nabla \ell(y)$. Using
$\nabla \pi_\theta = \pi_\theta\, s$, the first sum is $\mathbb{E}[\ell\, s]$. The reference does not depend on $\theta$, so
$\nabla \ell = s$ and the second sum is $\mathbb{E}[s] = \sum_y \nabla \pi_\theta(y) = \nabla 1 = 0$.""",
        partial=r"""$\nabla \mathrm{KL} = \sum_y \nabla \pi_\theta(y)\, \ell(y) = \sum_y \pi_\theta(y)\, s(y)\, \ell(y) = \mathbb{E}[\ell\, s]$.""",
        wrong=r"""$\nabla \mathrm{KL} = \mathbb{E}[\nabla \ell] = \mathbb{E}[s]$, which is the same as $\mathbb{E}[\ell s]$ because $\ell$ is a constant.""",
    ),
    WrittenAnswer(
        "06_kl_estimators", "ex11_6b__manual",
        good=r"""With $\ell$ held fixed (no gradient flows through it), the estimator is $\ell(y)\, s(y)$ for one sample
$y \sim \pi_\theta$; its expectation over $\pi_\theta$ is $\mathbb{E}[\ell\, s]$, exactly the gradient found in (a). So it is
unbiased. Letting the gradient flow through $\ell$ would add an extra $s$, whose mean is 0 but which adds noise.""",
        partial=r"""Its expectation is $\mathbb{E}[\ell\, s]$, which is the gradient from (a), so it is unbiased.""",
        wrong="",
    ),
    WrittenAnswer(
        "07_logprob_plumbing", "task1b__aggregation_manual",
        good=r"""With the per-response mean each token of the 2-token answer gets weight $\frac{1}{B} \cdot \frac{1}{2}$ and each
token of the 4-token answer $\frac{1}{B} \cdot \frac{1}{4}$; with the sum every token gets $\frac{1}{B}$. So the tokens of
the long wrong answer are pushed down only half as hard: the per-response mean favours **long** wrong answers.
Only the sum is right because $\log \pi_\theta(y \mid x) = \sum_t \log \pi_\theta(y_t \mid s_t)$, so the gradient of
$\mathbb{E}[A \log \pi_\theta(y \mid x)]$ gives every token the full weight $A$; dividing by the length changes the objective.""",
        partial=r"""The per-response mean divides by the length, so longer answers get smaller weights per token. The sum
is the correct gradient.""",
        wrong=r"""The per-response mean treats all answers the same, so it is fairer than the sum, which pushes long answers
down more. It favours short answers.""",
    ),
    WrittenAnswer(
        "08_tinylm_reinforce", "ex11_10__why_manual",
        good=r"""In my panel they disagree clearly at $T = 0.25$: $k_3$ is about 0.04 while the exact KL is about 0.10, and
$k_1$ (about 0.10) agrees with the exact value within its error bar. At $T = 0.5$ $k_3$ is a bit low but within the
error bars, and for $T \ge 0.75$ all three agree ($T = 1$ is 0).

Why: at low $T$ the sampler is much sharper than the reference, so tokens with $u = \pi_\text{ref}/\pi_\theta \gg 1$
are almost never sampled. $k_3$ is unbiased only because those rare samples give huge values; in a finite batch they
are usually missing, so the mean is usually far too low (and occasionally far too high), as in Exercise 11.4(d).
$k_1$ has no such heavy tail. At $T \ge 1$ the sampler is flatter than the reference, $u$ stays small for whatever it
draws, and $k_3$ is fine (even lower variance than $k_1$).

So for an RL-trained policy that has become more confident than its reference, $k_3$ estimated from its own samples
will tend to underestimate the KL; $k_1$, or more samples, is safer.""",
        partial=r"""They disagree at low temperature, where $k_1$ is right. $k_3$ has a high variance there because the
ratio $u$ can be very large.""",
        wrong=r"""They disagree at high temperature, because the samples are more random there and $k_1$ becomes noisy,
so $k_3$ is the better estimator for RL-trained policies.""",
    ),
]
