"""The learners' JupyterLab (scripts/lab.py): its CSS, ``custom/custom.css`` beside this file."""

from pathlib import Path

c = get_config()  # noqa: F821 (traitlets defines it in a configuration file)
c.LabApp.custom_css = True
c.ServerApp.tornado_settings.update({"static_custom_path": [str(Path(__file__).parent / "custom")]})
