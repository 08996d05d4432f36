"""User errors on the command line: one line naming the field and value, exit status 2, no traceback,
and nothing loaded or written first. Each case runs `reasoning_rl.cli.commands.main(argv)` in this process (a subprocess
each cost the suite minutes of imports); a few go through a real `python -m reasoning_rl` subprocess to show the
entry point prints the same.

Also: a second run into a directory that holds a run is refused before it touches that run's files;
`--version`; every subcommand's help shows its defaults and an example.
"""
import os
import subprocess

import pytest

from tests.conftest import PY, ROOT, run_env
from verifiers import Verifier, VerifierSpec


def _cli(*args, cwd=None, timeout=120):
    return subprocess.run([PY, "-m", "reasoning_rl", *args], capture_output=True, text=True, timeout=timeout,
                          env=run_env(HF_HUB_OFFLINE="1"), cwd=cwd or ROOT)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("bad")

    def write(name, text):
        (d / name).write_text(text)
        return str(d / name)

    return {
        "dir": str(d),
        "ok": write("ok.jsonl", '{"prompt": "1+1=", "answer": "2"}\n'),
        "noanswer": write("noanswer.jsonl", '{"prompt": "1+1="}\n'),
        "noprompt": write("noprompt.jsonl", '{"question": "1+1=", "answer": "2"}\n'),
        "empty": write("empty.jsonl", ""),
        "nullans": write("nullans.jsonl", '{"prompt": "1+1=", "answer": null}\n{"prompt": "2+2=", "answer": ""}\n'),
        "badjson": write("badjson.jsonl", '{"prompt": "1+1=", "answer": "2"}\n{"prompt": "2+2=", \n'),
        "notobjects": write("list.json", '{"prompt": "x"}'),
        "norej": write("norej.jsonl", '{"prompt": "p", "chosen": "a"}\n'),
        "badyaml": write("bad.yaml", "x: [\n"),
        "comp": write("comp.jsonl", '{"completion": "2", "answer": "2"}\n'),
        "gold": write("gold.jsonl", '{"gold": "2", "prediction": "2", "equivalent": true}\n'),
        "nocompletion": write("nocompletion.jsonl", '{"prompt": "1+1=", "passed": true}\n'),
        "noverdict": write("noverdict.jsonl", '{"prompt": "1+1=", "completion": "2"}\n'),
        "allfailed": write("allfailed.jsonl", '{"prompt": "1+1=", "completion": "3", "passed": false}\n'),
        "nomodel": str(d / "empty_model_dir"),
    }


# (arguments, a fragment the one line must contain): every case exits 2 with one line on stderr.
# {name} is replaced by the path of that file above.
CASES = [
    # config
    (["config", "--config", "{dir}"], "is a directory"),
    (["config", "--config", "{badyaml}"], "not valid YAML"),
    (["config", "--config", "{dir}/missing.yaml"], "does not exist"),
    (["config", "--set", "nonsense"], "--set expects section.key=value, got 'nonsense'"),
    (["config", "--set", "grpo.nope=1"], "unknown config key 'grpo.nope'"),
    (["config", "--set", "grpo.steps=-1"], "grpo.steps"),
    (["config", "--set", "grpo.engine=nope"], "grpo.engine"),
    # cross-field rules, checked when the config is built (they used to fail mid-run or in transformers)
    (["config", "--set", "grpo.engine=openai"], "grpo.engine=openai needs grpo.engine_url and grpo.engine_model"),
    (["config", "--set", "grpo.advantage=process"], "grpo.advantage=process needs grpo.prm_model"),
    (["config", "--set", "model.tiny.num_heads=3"], "model.tiny.hidden_size (128) must be divisible"),
    # a name a registry resolves: checked when the command reads its config, not by the config module itself
    (["config", "--set", "grpo.environment=nope"], "grpo.environment: unknown environment 'nope'; valid:"),
    (["train", "ppo", "--set", "ppo.environment=nope", "--set", "output_dir={dir}/r4"],
     "ppo.environment: unknown environment 'nope'"),
    (["train", "grpo", "--set", "tasks.families=[add, nope]", "--set", "output_dir={dir}/r2"],
     "tasks.families: unknown family 'nope'"),
    (["train", "grpo", "--set", "tasks.families=[]", "--set", "output_dir={dir}/r3"], "tasks.families is empty"),
    # unknown verifiers, on every command that takes one
    (["verify", "{comp}", "--verifier", "nope"], "unknown verifier 'nope'; valid:"),
    (["curate", "--verifier", "nope", "-o", "{dir}/c", "--dataset", "{ok}"], "unknown verifier 'nope'"),
    (["verifiers", "calibrate", "--gold", "{gold}", "--verifier", "nope"], "unknown verifier 'nope'"),
    (["verifiers", "probe", "nope"], "unknown verifier 'nope'"),
    (["pairs", "--archive", "{ok}", "--verifier", "nope", "-o", "{dir}/p"], "unknown verifier 'nope'"),
    # models
    (["eval", "--set", "model.name_or_path=/no/such/dir", "--dataset", "{ok}"], "model.name_or_path: '/no/such/dir'"),
    (["eval", "--set", "model.name_or_path=nobody/no-model", "--dataset", "{ok}"], "model.name_or_path: 'nobody/no-model'"),
    (["eval", "--set", "model.name_or_path={dir}", "--dataset", "{ok}"], "holds no config.json"),
    (["train", "grpo", "--set", "model.name_or_path=/no/such/dir", "--set", "output_dir={dir}/r0"], "model.name_or_path"),
    (["eval", "--set", "model.name_or_path={dir}/m.gguf", "--dataset", "{ok}"], "ends in .gguf but is not a file"),
    (["eval", "--set", "model.gguf_file=m.gguf", "--dataset", "{ok}"], "model.gguf_file: value 'm.gguf' needs"),
    (["demo", "--model", "nope"], "demo --model: value 'nope' has no demo (choose from ['gemma3-270m', "
                                  "'smollm2-135m-instruct'])"),
    (["train", "dpo", "--pairs", "{ok}", "--set", "dpo.beta=0"], "dpo.beta: value 0 makes every pair's loss"),
    (["demo", "--set", "grpo.eval_at_end=false"], "demo: grpo.eval_at_end: value false leaves the demo nothing"),
    (["demo", "--tools"], "demo --tools: give --model (choose from ['smollm2-135m-instruct'])"),
    (["demo", "--traces", "8"], "demo --traces: value 8 needs --tools"),
    (["demo", "--tools", "--model", "nope"], "demo --model: value 'nope' has no tool demo (choose from "
                                             "['smollm2-135m-instruct'])"),
    # a distillation teacher, and SFT on verified samples: checked before anything loads
    (["train", "distill", "--teacher", "/no/such/teacher", "--set", "output_dir={dir}/t1"],
     "distill.teacher: '/no/such/teacher' is not a directory"),
    (["train", "distill", "--set", "output_dir={dir}/t2"], "distill.teacher: empty; name the teacher"),
    (["train", "distill", "--teacher", "tiny", "--set", "distill.teacher_gguf_file=x.gguf", "--set",
      "output_dir={dir}/t3"], "distill.teacher_gguf_file: value 'x.gguf' needs distill.teacher to be the folder"),
    (["sft", "--samples", "{nocompletion}", "--output", "{dir}/s1"], "row 0 has no 'completion' text"),
    (["sft", "--samples", "{ok}", "--output", "{dir}/s2"], "row 0 has no 'completion' text"),
    (["sft", "--samples", "{noverdict}", "--output", "{dir}/s3"], "row 0 carries no verdict"),
    (["sft", "--samples", "{allfailed}", "--output", "{dir}/s4"], "no sample to train on (0 targets of 0 prompts "
                                                                  "from 1 samples; left out: 1 failed)"),
    (["sft", "--samples", "{dir}/missing.jsonl", "--output", "{dir}/s5"], "does not exist"),
    (["sft", "--samples", "{nocompletion}"], "sft --samples: give --output DIR"),
    # runs
    (["train", "grpo", "--resume", "--set", "output_dir={dir}/no_run"], "holds no checkpoint"),
    (["train", "ppo", "--resume"], "--resume needs the run to continue"),
    (["train", "grpo", "--resume", "--overwrite", "--set", "output_dir={dir}/r1"], "exclude each other"),
    (["train", "grpo", "--set", "output_dir={ok}"], "is a file, not a directory"),
    # datasets: checked before the model loads
    (["eval", "--dataset", "{noanswer}"], "tasks.reference_col: {noanswer!r} split 'train' row 0 has no column 'answer' "
                                          "(columns: ['prompt'])"),
    (["eval", "--dataset", "{noprompt}"], "tasks.prompt_col: {noprompt!r} split 'train' row 0 has no column 'prompt'"),
    (["eval", "--dataset", "{ok}"], "tasks.heldout_percent: the held-out share (10%, by hash) of {ok!r} is empty"),
    (["eval", "--dataset", "{ok}", "--preset", "gsm8k"], "tasks.prompt_col: {ok!r} split 'train' row 0 has no column "
                                                         "'question'"),
    (["eval", "--dataset", "{ok}", "--set", "tasks.test_split=test"], "a file is one split ('train'), so split 'test'"),
    (["eval", "--dataset", "{ok}", "--set", "tasks.reward=[{{verifier: nope}}]"], "unknown verifier 'nope'"),
    (["eval", "--dataset", "{ok}", "--set", "tasks.reward=[{{verifier: math, weight: x}}]"],
     "tasks.reward[0].weight: value 'x' is not a number"),
    (["eval", "--dataset", "{ok}", "--set", "tasks.reward=[{{verifier: math}}]", "--set", "tasks.outcome=exact"],
     "tasks.outcome: value 'exact' is not one of the reward terms ['math']"),
    (["eval", "--dataset", "{ok}", "--set", "tasks.chat_template=off", "--set", "tasks.template={{nope}}"],
     "tasks.template:"),
    (["eval", "--dataset", "{ok}", "--set", "model.device=cuda:7"], "model.device"),
    (["eval", "--dataset", "{empty}"], "has no rows"),
    (["eval", "--dataset", "{nullans}"], "no usable rows: all 2 have an empty reference"),
    (["eval", "--dataset", "{badjson}"], "badjson.jsonl:2: not valid JSON"),
    (["eval", "--dataset", "{notobjects}"], "must hold a list of objects"),
    (["eval", "--dataset", "{dir}/missing.jsonl"], "does not exist"),
    (["curate", "--dataset", "{noanswer}", "-o", "{dir}/c2"], "has no column 'answer'"),
    (["pairs", "--dataset", "{empty}", "-o", "{dir}/p2"], "has no rows"),
    (["pairs", "--archive", "{dir}/missing.jsonl", "-o", "{dir}/p3"], "--archive"),
    (["train", "dpo", "--pairs", "{norej}", "--set", "output_dir={dir}/d1"], "row 0 has no 'rejected' column"),
    (["train", "dpo", "--pairs", "{empty}", "--set", "output_dir={dir}/d2"], "has no rows"),
    (["verify", "{ok}"], "row 0 has no column 'completion'"),
    (["verify", "{empty}"], "no rows"),
    (["verifiers", "calibrate", "--gold", "{ok}"], "has no column 'gold'"),
    # argument ranges
    (["eval", "--temperature", "-1", "--dataset", "{ok}"], "argument --temperature: expected a number >= 0, got '-1'"),
    (["eval", "--temperature", "nan", "--dataset", "{ok}"], "argument --temperature"),
    (["eval", "--limit", "-3", "--dataset", "{ok}"], "argument --limit: expected a whole number >= 0, got '-3'"),
    (["eval", "-n", "0", "--dataset", "{ok}"], "argument -n/--n: expected a whole number >= 1, got '0'"),
    (["curate", "--max-tokens", "0", "-o", "{dir}/c3", "--dataset", "{ok}"], "argument --max-tokens"),
    (["curate", "-n", "x", "-o", "{dir}/c4"], "argument -n/--n"),
    (["pairs", "--k", "0", "-o", "{dir}/p4"], "argument --k"),
    (["verify", "{comp}", "--timeout", "0"], "argument --timeout: expected a number > 0"),
    (["verify", "{comp}", "--workers", "0"], "argument --workers"),
    (["verifiers", "probe", "math", "--budget", "-1"], "argument --budget"),
    (["train", "grpo", "--no-such-flag"], "unrecognized arguments: --no-such-flag"),
    (["nope"], "invalid choice: 'nope'"),
]


def _main(argv, capsys):
    """(exit status, stderr) of `reasoning-rl ARGV` run in this process, as the console script would exit."""
    from reasoning_rl.cli import main

    capsys.readouterr()
    try:
        rc = main(argv)
    except SystemExit as e:  # argparse's own errors exit
        rc = e.code
    return rc, capsys.readouterr().err


@pytest.mark.timeout(600)
def test_every_bad_input_prints_one_line_and_exits_2(files, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(ROOT)
    failures = []
    for args, fragment in CASES:
        argv = [a.format(**files) for a in args]
        rc, err = _main(argv, capsys)
        lines = err.strip().splitlines()
        if not (rc == 2 and len(lines) == 1 and fragment.format(**files) in lines[0] and "Traceback" not in err):
            failures.append((argv, rc, err[-600:]))
    assert not failures, "\n\n".join(f"{a}: rc={rc}\n{err}" for a, rc, err in failures)


@pytest.mark.parametrize("case", [0, 4, 15, len(CASES) - 1])  # a config error, a key error, a verifier, argparse
def test_the_console_entry_point_prints_the_same_line(files, case):
    args, fragment = CASES[case]
    r = _cli(*[a.format(**files) for a in args])
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and fragment.format(**files) in lines[0], r.stderr


@pytest.mark.timeout(120)
def test_debug_shows_the_traceback(files):
    r = _cli("--debug", "eval", "--dataset", files["empty"])
    assert r.returncode != 0 and "Traceback" in r.stderr and "UserError" in r.stderr


@pytest.mark.timeout(300)
def test_a_second_run_into_the_same_directory_is_refused_before_touching_it(tmp_path):
    out = tmp_path / "run"
    common = ["--set", f"output_dir={out}", "--set", "model.sft_warm_start=false", "--set", "model.tiny.num_layers=1",
              "--set", "grpo.steps=1", "--set", "grpo.prompts_per_step=2", "--set", "grpo.group_size=2",
              "--set", "eval.size=4", "--set", "grpo.train_prompts=8", "--set", "grpo.verifier_workers=1"]
    first = _cli("train", "grpo", *common, timeout=240)
    assert first.returncode == 0, first.stderr[-2000:]
    before = {p: (p.stat().st_mtime_ns, p.read_bytes() if p.is_file() else None) for p in out.rglob("*")}
    second = _cli("train", "grpo", *common, "--set", "seed=1")
    assert second.returncode == 2 and "already holds a run" in second.stderr and "--overwrite" in second.stderr
    assert {p: (p.stat().st_mtime_ns, p.read_bytes() if p.is_file() else None) for p in out.rglob("*")} == before
    ppo = _cli("train", "ppo", "--set", f"output_dir={out}")  # another command into it: refused too
    assert ppo.returncode == 2 and "already holds a run" in ppo.stderr


def test_overwrite_removes_only_the_run_files(tmp_path):
    from reasoning_rl.errors import UserError
    from reasoning_rl.data.run_dir import claim

    (tmp_path / "metrics.jsonl").write_text("{}\n")
    (tmp_path / "final").mkdir()
    (tmp_path / "final" / "config.json").write_text("{}")
    (tmp_path / "my_notes.txt").write_text("keep me")
    with pytest.raises(UserError, match=r"already holds a run \(metrics.jsonl, final\)"):
        claim(str(tmp_path), "grpo")
    assert claim(str(tmp_path), "grpo", overwrite=True) == str(tmp_path)
    assert sorted(os.listdir(tmp_path)) == ["my_notes.txt"]
    assert claim(str(tmp_path), "grpo") == str(tmp_path)  # no run left in it: a new run may start


def test_default_runs_get_their_own_directories(tmp_path, monkeypatch):
    from reasoning_rl.data.run_dir import claim

    monkeypatch.chdir(tmp_path)
    a = claim("", "grpo")
    os.makedirs(a)
    b = claim("", "grpo")
    assert a != b and a.startswith(os.path.join("runs", "grpo-")) and b.startswith(a)


def test_version_and_help(root):
    from reasoning_rl.cli.commands import build_parser

    r = _cli("--version")
    assert r.returncode == 0 and r.stdout.startswith("reasoning-rl ") and "unknown" not in r.stdout
    ap = build_parser()
    todo = [(["reasoning-rl"], ap)]
    seen = 0
    while todo:
        path, parser = todo.pop()
        subs = [a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction"]
        for sub in subs:
            todo += [(path + [name], p) for name, p in sub.choices.items()]
        if subs:
            continue
        text = parser.format_help()
        seen += 1
        assert "example:\n  reasoning-rl " in text, path
        for action in parser._actions:
            if action.option_strings and action.dest != "help":
                assert action.help, f"{' '.join(path)} {action.option_strings[0]} has no help text"
                if action.default not in (None, False, [], "==SUPPRESS=="):
                    assert f"(default: {action.default})" in " ".join(text.split()), (path, action.dest)
    assert seen >= 14  # every leaf subcommand was looked at


class AlwaysErrs(Verifier):
    """A verifier that crashes on every input."""

    name, version = "test_always_errs", "1"
    spec = VerifierSpec(needs=(), default_timeout=5.0)

    def verify(self, completion, reference=None, **options):
        raise RuntimeError("cannot parse anything")


@pytest.mark.timeout(120)
def test_probe_counts_an_erroring_verifier_as_failed(capsys):
    import verifiers
    from reasoning_rl.cli import main
    from reasoning_rl.types import Status
    from verifiers.probes import run_probes
    from verifiers.registry import REGISTRY

    verifiers.register(AlwaysErrs())
    try:
        results = run_probes("test_always_errs", budget=5.0)
        assert results and all(r.status is Status.ERROR for r in results)
        assert all(r.failed for r in results)  # a verifier that errs on everything must not read "all passed"
        assert main(["verifiers", "probe", "test_always_errs"]) == 1
        assert f"{len(results)} of {len(results)} probes FAILED" in capsys.readouterr().err
    finally:
        REGISTRY.remove("test_always_errs")


