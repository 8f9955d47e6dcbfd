"""A copy of README.md and tests/fixtures/device in tmp_path that a figures script (allreduce_figures.py,
e2e_figures.py) reads and writes instead of the checkout's."""
import shutil


def sandbox(tmp_path, monkeypatch, figures):
    """(fixtures folder, README path) copied into tmp_path, with the script's FIXTURES and README pointing at them."""
    fixtures = tmp_path / "device"
    shutil.copytree(figures.FIXTURES, fixtures)
    readme = tmp_path / "README.md"
    shutil.copy(figures.README, readme)
    monkeypatch.setattr(figures, "FIXTURES", str(fixtures))
    monkeypatch.setattr(figures, "README", str(readme))
    return fixtures, readme
