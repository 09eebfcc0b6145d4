"""kopf runs with its records in annotations, and holds less of the cluster at once
than its defaults would: its listing paged, its idle workers gone sooner."""

from __future__ import annotations

import kopf

from helmr.operator.kopf import settings as kopf_settings


def test_the_listing_is_paged_and_idle_workers_let_go_sooner_than_by_default() -> None:
    default = kopf.OperatorSettings()
    settings = kopf.OperatorSettings()
    kopf_settings.configure(settings)
    assert default.watching.chunk_size is None  # kopf lists everything in one response
    assert settings.watching.chunk_size == kopf_settings.LISTING_CHUNK
    assert settings.queueing.idle_timeout < default.queueing.idle_timeout


def test_kopf_keeps_its_records_in_annotations_of_helmr_dev() -> None:
    settings = kopf.OperatorSettings()
    kopf_settings.configure(settings)
    assert isinstance(settings.persistence.progress_storage, kopf.AnnotationsProgressStorage)
    assert settings.persistence.progress_storage.prefix == "kopf.helmr.dev"
    assert isinstance(settings.persistence.diffbase_storage, kopf.AnnotationsDiffBaseStorage)
