"""Evaluation during a run: every `eval_k_samples` completions per validation problem at the
chosen steps (or compute checkpoints), avg@k / best@k / worst@k, the per-problem counts, and
where the run names one (`RunConfig.eval_judge`) a judge's mean process score of every
completion (`eval/judge`; its FLOPs apart in the ledger)."""

from __future__ import annotations

from isolab.compute.ledger import FlopLedger
from isolab.config import RunConfig
from isolab.metrics import metrics_from_counts
from isolab.models.sampling import sample_and_grade
from isolab.rl.rewards import PricedReward
from isolab.tasks import Task
from isolab.tasks.base import as_text
from isolab.vocab import EVAL_JUDGE, EVAL_PREFIX, EVAL_SET_PREFIX

#: Completions the judge scores in one forward (a 7B hub PRM at 4,800 at once would not fit).
JUDGE_BATCH = 64


def eval_set_metric(name: str, metric: str) -> str:
    """`eval/avg@4` of evaluation set `name` → `eval-<name>/avg@4`."""
    return f"{EVAL_SET_PREFIX}{name}/" + metric.removeprefix(EVAL_PREFIX)


class Evaluator:
    """Samples `eval_k_samples` completions per validation problem and logs avg/best/worst@k."""

    def __init__(
        self,
        cfg: RunConfig,
        task: Task,
        problems,
        tokenizer,
        ledger: FlopLedger,
        judge: PricedReward | None = None,
    ):
        """`judge`: a process reward model (`isolab.rl.rewards.prm`) that scores every
        completion, or None."""
        self.cfg, self.task, self.tok, self.ledger, self.judge = cfg, task, tokenizer, ledger, judge
        self.prompts = [as_text(task.prompt(p), tokenizer) for p in problems]
        self.answers = [p.answer for p in problems]
        self.ids = [p.id for p in problems]
        self.history: dict[int, list[int]] = {}
        self.sets: dict[str, Evaluator] = {}
        checkpoints = cfg.eval_at_rollouts or ()
        self.pending = sorted(set(checkpoints))

    def due(self, step: int, rollouts: int, last_step: bool) -> bool:
        if self.cfg.eval_at_rollouts:
            hit = [c for c in self.pending if c <= rollouts]
            self.pending = [c for c in self.pending if c > rollouts]
            return bool(hit) or last_step
        if last_step or step == 0:
            return True
        return self.cfg.eval_every > 0 and step % self.cfg.eval_every == 0

    def __call__(self, model, step: int, max_new_tokens: int) -> dict[str, float]:
        out = self._evaluate(model, step, max_new_tokens)
        for name, extra in self.sets.items():
            metrics = extra._evaluate(model, step, max_new_tokens)
            out.update({eval_set_metric(name, k): v for k, v in metrics.items()})
        return out

    def state_dict(self) -> dict:
        """The evaluations so far and those to come, with every extra set's (a checkpoint)."""
        return {
            "history": {str(k): v for k, v in self.history.items()},
            "pending": list(self.pending),
            "sets": {name: extra.state_dict() for name, extra in self.sets.items()},
        }

    def load_state_dict(self, state: dict) -> None:
        self.history = {int(k): list(v) for k, v in state["history"].items()}
        self.pending = list(state["pending"])
        for name, extra in self.sets.items():
            extra.load_state_dict(state["sets"][name])

    def add_set(self, name: str, task: Task, problems) -> None:
        """Evaluate `problems` of `task` too, at the same checkpoints and with the same samples,
        logged as `eval-<name>/…` (`RunConfig.eval_sets`)."""
        self.sets[name] = Evaluator(self.cfg, task, problems, self.tok, self.ledger, self.judge)

    def _evaluate(self, model, step: int, max_new_tokens: int) -> dict[str, float]:
        result = sample_and_grade(
            model,
            self.tok,
            self.prompts,
            self.answers,
            self.task.verify,
            n_samples=self.cfg.eval_k_samples,
            temperature=self.cfg.temperature,
            max_new_tokens=max_new_tokens,
            seed=self.cfg.seed * 100_003 + step,
        )
        self.ledger.record_eval(result.prompt_lens, result.completion_lens)
        counts = result.counts.tolist()
        self.history[step] = counts
        metrics = metrics_from_counts(counts, self.cfg.eval_k_samples, self.cfg.eval_ks)
        if self.judge is not None:
            metrics[EVAL_JUDGE] = self.judged(self.judge, result.texts)
        return metrics

    def judged(self, judge: PricedReward, texts: list[str]) -> float:
        """`judge`'s mean score of every completion (each prompt's `eval_k_samples`, in order),
        its forward charged to `flops/judge`."""
        k = self.cfg.eval_k_samples
        prompts = [p for p in self.prompts for _ in range(k)]
        scores: list[float] = []
        for start in range(0, len(texts), JUDGE_BATCH):  # a hub judge holds a batch in memory
            part = slice(start, start + JUDGE_BATCH)
            scores += judge(prompts=prompts[part], completions=texts[part])
            self.ledger.record_judge(judge.reward_model_config, judge.last_seq_lens)
        return float(sum(scores) / len(scores))
