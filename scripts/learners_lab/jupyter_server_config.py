"""The learners' JupyterLab (scripts/lab.py; Binder's too, through JUPYTER_CONFIG_PATH): its CSS,
``custom/custom.css`` beside this file, which puts an explorer's controls above its chart, lines up its sliders
and fits the chart to a phone's narrow output.

JupyterLab 4 loads ``custom/custom.css`` only with ``LabApp.custom_css`` on, and serves it from the server's
``static_custom_path``: by default the ``custom`` folder of the Jupyter config directory (JUPYTER_CONFIG_DIR, the
learner's ``~/.jupyter``; JUPYTER_CONFIG_PATH is not searched), and not a setting of ServerApp. It is a tornado
setting, which ``ServerApp.tornado_settings`` overrides: this points it at the book's folder, so that nothing is
written into the learner's ``~/.jupyter``. Notebook 7, on the same server, loads the same file.
"""

from pathlib import Path

c = get_config()  # noqa: F821 (traitlets defines it in a configuration file)
c.LabApp.custom_css = True
c.ServerApp.tornado_settings.update({"static_custom_path": [str(Path(__file__).parent / "custom")]})
