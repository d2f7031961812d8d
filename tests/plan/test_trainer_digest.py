"""The plan's cache key holds a digest of the trainer's source (``plan._cache.trainer_digest``): the
``.py`` files of ``core``, ``models`` and ``training``, their paths and bytes, and nothing else."""

from orthotune.plan._cache import TRAINER_PACKAGES, source_digest, trainer_digest


def test_the_trainers_digest_reads_its_packages_python_files_only(tmp_path):
    for package in ("core", "models", "search"):
        (tmp_path / package / "sub").mkdir(parents=True)
        (tmp_path / package / "sub" / "_a.py").write_text(f"A = '{package}'\n")
    digest = source_digest(tmp_path, ("core", "models"))
    assert digest == source_digest(tmp_path, ("core", "models"))
    (tmp_path / "search" / "sub" / "_a.py").write_text("A = 'changed'\n")  # not a trainer package
    (tmp_path / "models" / "notes.txt").write_text("not code")
    assert source_digest(tmp_path, ("core", "models")) == digest
    (tmp_path / "models" / "sub" / "_a.py").write_text("A = 'models, changed'\n")
    assert source_digest(tmp_path, ("core", "models")) != digest
    (tmp_path / "models" / "sub" / "_a.py").write_text("A = 'models'\n")
    (tmp_path / "models" / "sub" / "_a.py").rename(tmp_path / "models" / "sub" / "_b.py")  # same bytes, moved
    assert source_digest(tmp_path, ("core", "models")) != digest
    assert TRAINER_PACKAGES == ("core", "models", "training") and len(trainer_digest()) == 64
