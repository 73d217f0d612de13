"""`python -m analysis browse DIR`: one self-contained HTML page (browser.html) to filter, group and overlay the
runs of a study, of every study of a results folder, or the tracked values of a history over commits."""
