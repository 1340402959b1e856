import pytest


@pytest.fixture(scope="session")
def model_cache(tmp_path_factory):
    """One warm-started preset cache for the whole test session (built once, ~10 s)."""
    return tmp_path_factory.mktemp("models")
