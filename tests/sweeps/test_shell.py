"""Run scripts read as bash expands them (sweeps.frameworks.shell): each value checked against what bash itself prints."""

import re
import shutil
import subprocess

import pytest

from sweeps.frameworks.expansion import shown, unknown_in
from sweeps.frameworks.shell import ScriptError, read_script

LAUNCH = re.compile(r"trainer\.main")


def words(text: str, **variables: str) -> list[str]:
    return read_script(text, LAUNCH, variables).words


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        ("B=${B:-1024}\npython -m trainer.main b=$B", ["b=1024"]),
        ("B=${B:-1024}\nM=$((B / 4))\npython -m trainer.main m=$M n=$(( (B + 3) % 7 ))", ["m=256", "n=5"]),
        ("X=''\npython -m trainer.main a=${X:-d} b=${X-d}", ["a=d", "b="]),
        ("N=5\npython -m trainer.main \\\n  a=\"$N x\" \\\n  b='$N'", ["a=5 x", "b=$N"]),
        ("export A=1\npython -m trainer.main a=${A} c=${C:=3} d=$C", ["a=1", "c=3", "d=3"]),
        (
            'A=(x=1 "y=2 3")\nA+=(z=$((2*3)))\nE=()\npython -m trainer.main "${A[@]}" "${E[@]}" w "$@"',
            ["x=1", "y=2 3", "z=6", "w"],
        ),
        ("V=a\ncase $V in\n  a|b) R=1 ;;\n  *) R=2 ;;\nesac\npython -m trainer.main r=$R", ["r=1"]),
        ('V=c\ncase "$V" in\n  a)\n    R=1\n    ;;\n  *)\n    R=2\n    ;;\nesac\npython -m trainer.main r=$R', ["r=2"]),
        (
            'N=8\nif [ "$N" -gt 4 ] && [ x = y ]; then R=1\nelif [[ $N == 8 ]]; then\n R=2\nelse\n R=3\nfi\n'
            "python -m trainer.main r=$R",
            ["r=2"],
        ),
        ("f() {\n  B=9\n}\nB=${B:-4}\npython -m trainer.main b=$B  # note", ["b=4"]),
    ],
)
def test_a_scripts_words_are_what_bash_expands(script, expected):
    """Each script's words as bash would pass them to the command (checked against bash itself where it is here)."""
    assert words(script) == expected
    bash = shutil.which("bash")
    if bash is not None:  # the same script with the command replaced by printing its arguments
        printed = script.replace("python -m trainer.main", "printf '%s\\n'")
        run = subprocess.run([bash, "-c", printed], capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"}, check=True)
        assert run.stdout.splitlines() == expected


def test_the_users_variables_win_over_the_scripts_defaults_and_assignments():
    assert words("B=${B:-1024}\nC=7\npython -m trainer.main b=$B c=$C", B="64", C="8") == ["b=64", "c=8"]


def test_what_only_running_the_script_tells_is_marked_not_guessed():
    got = words('H=$HOME\nN=`nproc`\npython -m trainer.main a="$H/m" b=$N c=$(date) d=${UNSET}')
    assert [unknown_in(w) for w in got] == [["$HOME"], ["`nproc`"], ["$(date)"], ["$UNSET"]]
    assert shown(got[0]) == "a=$HOME/m"


def test_a_case_on_an_unknown_variable_takes_its_first_branch_and_says_so_an_unknown_if_is_false():
    script = "D=${D:-$(detect)}\ncase $D in\n gpu) B=1024 ;;\n npu) B=16 ;;\nesac\nif [ $D = npu ]; then B=2; fi\n" \
             "if [ -n \"$(ls)\" ]; then B=3; fi\npython -m trainer.main b=$B"  # fmt: skip
    got = read_script(script, LAUNCH)
    assert got.words == ["b=1024"]
    assert got.assumed == ["case $D: only known when the script runs; read as 'gpu'",
                           'if [ -n "$(ls)" ]: only known when the script runs; read as false']  # fmt: skip
    assert read_script(script, LAUNCH, {"D": "npu"}).words == ["b=2"]


def test_a_script_without_the_command_or_with_open_quotes_is_refused_naming_the_line():
    with pytest.raises(ScriptError, match="no command matching"):
        words("echo hi")
    with pytest.raises(ScriptError, match="line 2: No closing quotation"):
        words("A=1\npython -m trainer.main a='x")


def test_an_arrays_commented_lines_are_left_out_and_its_other_elements_kept():
    script = 'A=(\n  --a 1\n  # --b 2\n  --c "x #y"  # note\n)\npython -m trainer.main ${A[@]}'
    assert words(script) == ["--a", "1", "--c", "x #y"]


def test_the_null_command_sets_its_defaults_as_bash_does():
    """SkyRL's scripts: ``: "${NAME:=default}"`` gives NAME its default unless set (the user's value wins)."""
    script = ': "${B:=1024}"\n: ${N:=5} # knobs\npython -m trainer.main b=$B n=$N'
    assert words(script) == ["b=1024", "n=5"]
    assert words(script, B="64") == ["b=64", "n=5"]
