"""The editions of the chapters, made from the MyST chapters for plain Jupyter and Colab (the command-line entry
points are scripts/make_editions.py, make_student.py, make_nbgrader.py and lab.py):

- ``walk``: the one cell walk; an ``Edition`` is an ordered list of ``Step``s, each with one job, and the two
  rules of their order (a gate step before ``ResolveMyst``; ``Step.comes_before``);
- ``editions``: every edition with the make target and script that write it (``EDITIONS``);
- ``chapter``: a chapter as the steps read it, with each cell's role (exercise text, solution, gate, check);
- ``steps``: the steps more than one edition takes (resolve MyST, drop glue records, captions, exercise
  metadata, prediction cells, drop what lies between a solution's gates);
- ``learners``, ``student``, ``nbgrader_course``: each edition's own steps and its list (``LEARNERS`` and
  ``LAB``, ``STUDENT``, ``NBGRADER``);
- ``cells``: the cells an edition adds (captions, prediction cells, stubs) and small facts about cells;
- ``exercise_cells``: the book's exercise convention, and the one format of an edition's exercise heading;
- ``plain_markdown``: MyST to plain Markdown, its ``ROLES`` and ``DIRECTIVES`` the list of what is supported;
  ``numbering``: the numbers of figures, equations and exercises (the one answer for an exercise's number);
  ``myst_syntax``: the MyST lines both read;
- ``learner_copies``: the learner's folder that ``make lab`` fills without losing an edited copy;
- ``command_line``: the command line the three ``make_*`` scripts share.
"""
