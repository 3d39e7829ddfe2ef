"""`gqa submit` on input past a limit: exit 2, one `gqa: error:` line, no
traceback, nothing recorded, and at once."""

import time

import pytest

BOMB = "".join(f"{name}: &{name} [{', '.join([f'*{prev}'] * 9 if prev else ['lol'] * 9)}]\n"
               for prev, name in zip([None, *"abcdefgh"], "abcdefghi")) + "command: [x]\n"
GRID = "command: [x]\nsweep:\n  grid:\n" + "".join(f"    p{i}: [{', '.join(map(str, range(20)))}]\n" for i in range(7))

CASES = [
    # (id, files, argv, the message after "gqa: error: ")
    ("alias bomb", {"job.yaml": BOMB}, ["submit", "job.yaml"],
     "job.yaml:5: more than 10000 values (each alias counted as what it refers to)"),
    ("duplicate key", {"job.yaml": "command: [x]\nresources:\n  gpus: 1\n  gpus: 2\n"}, ["submit", "job.yaml"],
     "job.yaml:4: duplicate key 'gpus' (first at line 3)"),
    ("nesting 100,000 deep", {"job.yaml": "command: [x]\ntags: " + "[" * 100_000 + "]" * 100_000 + "\n"},
     ["submit", "job.yaml"], "job.yaml:2: nested deeper than 32 levels"),
    ("7x20 sweep grid", {"job.yaml": GRID}, ["submit", "job.yaml"],
     "job.yaml:3: sweep has 1280000000 combinations; at most 100000"),
    ("array of a billion", {}, ["submit", "--array", "0-1000000000", "--", "true"],
     "array: array '0-1000000000' has 1000000001 tasks; at most 100000"),
    ("NUL in --workdir", {}, ["submit", "--workdir", "/tmp/a\x00b", "--", "true"], "workdir contains a NUL byte"),
    ("NUL in an argument", {}, ["submit", "--", "echo", "a\x00b"], "command[1] contains a NUL byte"),
    ("NUL in --env", {}, ["submit", "--env", "A=1\x00", "--", "true"], "env['A'] contains a NUL byte"),
    ("oversized job file", {"job.yaml": "command: [x]\n#" + "x" * (256 * 1024) + "\n"}, ["submit", "job.yaml"],
     "job.yaml: larger than 256 KiB, the limit for a job file"),
]


@pytest.mark.parametrize("files, argv, message", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_input_past_a_limit_is_refused_in_one_line(cli, files, argv, message):
    for name, text in files.items():
        (cli.home / name).write_text(text)
    start = time.perf_counter()
    code, out, err = cli(*argv)
    assert time.perf_counter() - start < 5
    assert (code, out, err) == (2, "", f"gqa: error: {message}\n")
    assert cli.job_count() == 0
