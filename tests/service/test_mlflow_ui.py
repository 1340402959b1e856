"""MLflow's UI, served as `groupscale up` serves it, opens an experiment on its runs table, in a real browser.

MLflow 3.17 chooses an experiment page's view in the browser, not from the experiment (service/mlflow_app.py): a page
opened from MLflow's experiment list (``#/experiments/<id>``, no ``workflowType`` in the link) landed on the GenAI
overview ("Traces 0", no runs) whatever tag the experiment had.
"""

from pathlib import Path

from mlflow import MlflowClient

from service.stack import registered_mlflow_app, start_mlflow, stop_process_group
from service.tracking import Tracking
from sweeps.spec import SweepSpec
from tests.browser import CHROMIUM, FLAGS, require_chromium
from tests.ports import free_port

SPEC = {"name": "ui", "task": {"name": "bandit"}, "model": {"preset": "tabular"}, "group_sizes": [2, 4]}
GENAI_LANDING = "Observability"  # the GenAI view's navigation (its overview shows "Traces 0")


def _shows(page, url: str, text: str, screenshot: Path) -> str:
    """The visible text of ``url`` once ``text`` shows (or after 60 s); a screenshot is kept."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    page.goto(url)
    try:
        page.get_by_text(text, exact=False).first.wait_for(timeout=60_000)
    except PlaywrightTimeout:
        pass  # the assertions say what is missing
    page.screenshot(path=str(screenshot), full_page=True)
    return page.inner_text("body")


def test_an_experiment_opened_without_a_view_in_its_link_lands_on_its_runs_table(tmp_path):
    """A sweep's experiment, and one that existed before (no groupscale tag), open on the runs table from their bare
    link in a browser that never chose a view; a browser whose user picked GenAI with MLflow's switch keeps it."""
    require_chromium()
    from playwright.sync_api import sync_playwright

    assert registered_mlflow_app() == "groupscale", "the install predates the entry point: run `make setup`"
    port = free_port()
    server = start_mlflow(tmp_path, "127.0.0.1", port)
    try:
        uri = f"http://127.0.0.1:{port}"
        client = MlflowClient(uri)
        earlier = client.create_experiment("made-before-groupscale")
        client.set_terminated(client.create_run(earlier, run_name="an earlier run").info.run_id)
        tracking = Tracking(uri)
        spec = SweepSpec.model_validate(SPEC | {"samples_per_step": [16]})
        sweep_exp, parent = tracking.start_sweep("sid", spec, "bandit")
        tracking.start_trial(sweep_exp, parent, spec, "tid", 2, 16, 0)
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
            try:
                page = browser.new_page(viewport={"width": 1400, "height": 900})  # a fresh profile: no view chosen
                for exp_id, run in ((sweep_exp, "ui (sid)"), (earlier, "an earlier run")):
                    text = _shows(page, f"{uri}/#/experiments/{exp_id}", run, tmp_path / f"experiment-{exp_id}.png")
                    assert "Run Name" in text and run in text and "matching run" in text, text[:2000]
                    assert GENAI_LANDING not in text and "Traces\n0" not in text, text[:2000]
                    assert "/runs?" in page.url and "workflowType=machine_learning" in page.url, page.url
                page.get_by_text("GenAI", exact=True).first.click()  # the user's choice, which MLflow keeps
                text = _shows(page, f"{uri}/#/experiments/{sweep_exp}", GENAI_LANDING, tmp_path / "chose-genai.png")
                assert GENAI_LANDING in text, text[:2000]
            finally:
                browser.close()
    finally:
        stop_process_group(server)
