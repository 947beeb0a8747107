from isolab.models import build_char_tokenizer
from isolab.rl.rewards import get_reward
from isolab.tasks import get_task
from isolab.tasks.arithmetic import ArithmeticSpec, generate_problems, raw_prompt, raw_target


def test_problems_are_deterministic_and_correct():
    a = generate_problems(200, seed=3)
    assert a == generate_problems(200, seed=3)
    assert a != generate_problems(200, seed=4)
    for p in a:
        assert sum(int(x) for x in p.question.split("+")) == int(p.answer)


def test_difficulty_knobs():
    spec = ArithmeticSpec(min_digits=3, max_digits=3, min_terms=3, max_terms=3)
    for p in generate_problems(50, seed=0, spec=spec):
        terms = p.question.split("+")
        assert len(terms) == 3 and all(len(t) == 3 for t in terms)


def test_raw_verifier_and_reward():
    task = get_task("arithmetic", "raw")
    assert (
        task.verify("753", "357")
        and not task.verify("357", "357")
        and not task.verify("7530", "357")
    )
    reward = get_reward("sparse", task)
    assert reward(prompts=["12+345="] * 2, completions=["753", "75"], answer=["357", "357"]) == [
        1.0,
        0.0,
    ]


def test_chat_verifier_takes_the_last_boxed_answer():
    task = get_task("arithmetic", "chat")
    assert task.verify("12 + 345 = \\boxed{357}", "357")
    assert not task.verify("\\boxed{357} … no, \\boxed{356}", "357")


def test_char_tokenizer_round_trip():
    tok = build_char_tokenizer()
    p = generate_problems(1, seed=1)[0]
    text = raw_prompt(p) + raw_target(p)
    ids = tok(text)["input_ids"]
    assert len(ids) == len(text)  # one token per character, no BOS added
    assert tok.decode(ids) == text
    batch = tok(["1+2=", "123+456="], padding=True)
    assert batch["input_ids"][0][:4] == [tok.pad_token_id] * 4  # left padding for generation
