"""MkDocs hook: the plots under reports/ (DVC outputs, committed) become files of the site, so a page links
`reports/compare/avg7.png` and `mkdocs build --strict` checks that it exists."""

from pathlib import Path

from mkdocs.structure.files import File


def on_files(files, config):
    root = Path(config.config_file_path).parent
    for path in sorted((root / "reports").rglob("*.png")):
        files.append(File(str(path.relative_to(root)), str(root), config.site_dir, config.use_directory_urls))
    return files
