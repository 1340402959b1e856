"""task.prompt_template at submit: a file under GROUPSCALE_DATA_ROOT that can format a prompt, else a field error; the
spec's relative template path is resolved from the spec file's folder like the data; chat without a template refused."""

import json

import pytest
from pydantic import ValidationError

from service.preflight import SpecError, check_dataset_task
from service.settings import Settings
from sweeps.spec import SweepSpec


def _spec(template: str | None = None, **model) -> dict:
    task = {"name": "dataset", "path": "data.jsonl", "rewards": [{"name": "exact_match"}]}
    task |= {"prompt_template": template} if template else {}
    return {"name": "t", "task": task, "model": {"preset": "chat-tiny", **model}, "group_sizes": [2, 4],
            "samples_per_step": [8], "seeds": [0]}  # fmt: skip


@pytest.fixture
def data(tmp_path):
    (tmp_path / "data.jsonl").write_text(
        "".join(json.dumps({"prompt": f"{i}+1=", "answer": str(i + 1)}) + "\n" for i in range(10))
    )
    return tmp_path


@pytest.mark.parametrize(("name", "text", "why"), [("ok.jinja", "{{ content }} Think.", None),
                                                    ("ok.txt", "Think. {}", None),
                                                    ("bad.txt", "Think.", "has no {}; allowed: exactly one {}"),
                                                    ("bad.jinja", "{{ question }}", "never uses {{ content }}")])  # fmt: skip
def test_a_template_that_cannot_format_a_prompt_is_a_field_error_at_submit(data, name, text, why):
    (data / "prompts").mkdir()
    (data / "prompts" / name).write_text(text)
    spec = SweepSpec.model_validate(_spec(f"prompts/{name}")).with_paths_from(data)
    assert spec.task.prompt_template == str(data / "prompts" / name)  # relative to the spec file, like the data
    settings = Settings(data_dir=data / "state", data_root=data)
    if why is None:
        assert check_dataset_task(spec.task, settings) == []
        return
    with pytest.raises(SpecError) as e:
        check_dataset_task(spec.task, settings)
    assert e.value.loc == ("task", "prompt_template") and why in str(e.value)


def test_a_template_outside_the_data_root_is_refused(data, tmp_path_factory):
    outside = tmp_path_factory.mktemp("elsewhere") / "t.txt"
    outside.write_text("{}")
    spec = SweepSpec.model_validate(_spec(str(outside))).with_paths_from(data)
    with pytest.raises(SpecError, match="outside the data root") as e:
        check_dataset_task(spec.task, Settings(data_dir=data / "state", data_root=data))
    assert e.value.loc == ("task", "prompt_template")


def test_chat_with_the_models_chat_template_turned_off_is_refused_naming_both_fields():
    data = _spec(chat_template=False)
    data["task"]["prompt_format"] = "chat"
    with pytest.raises(ValidationError, match="task.prompt_format chat .* model.chat_template false"):
        SweepSpec.model_validate(data)
    data["task"]["prompt_format"] = "html"
    with pytest.raises(ValidationError, match="'auto', 'chat' or 'raw'"):
        SweepSpec.model_validate(data)
