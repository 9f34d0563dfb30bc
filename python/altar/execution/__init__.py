"""altar.execution: the execution contract for backend authors and orchestration code.

The value types are plain dataclasses and enums; everything with behaviour
(identity, the wire codec, validation, digests, paths, the backends, the
fleet's job queue) is libaltar's, reached through cffi, so Python and the C
fleet never disagree. JobQueue and get_job_queue_registry are provisional.
"""

from ._backends import (
    Capacity,
    ExecutionBackend,
    KubernetesExecutionBackend,
    LocalDockerExecutionBackend,
    ModalExecutionBackend,
    NativeExecutionBackend,
    PluginRegistry,
    ProcessExecutionBackend,
    get_execution_backend_registry,
    native_backend_names,
)
from ._digests import (
    digest_verifier_program,
    file_digest,
    has_verification_record,
    is_valid_digest,
    verification_record_path,
    verify_file_digest,
    verify_transfer_digest,
)
from ._errors import (
    AltarError,
    BackendError,
    CapabilityNotSupported,
    ConfigError,
    DigestMismatchError,
    InvalidArgument,
    NotFound,
    PathEscapeError,
    PredicateError,
    ReconcileStalled,
    TransferIntegrityError,
    TransportError,
)
from ._ledger import InMemoryTaskLedger, NativeTaskLedger, RocksDBTaskLedger, TaskLedger
from ._model import (
    ContainerTaskSpec,
    GpuPool,
    PluginRunIdentity,
    ResourceRequest,
    TaskFailure,
    TaskHandle,
    TaskRecord,
    TaskState,
    TaskStatus,
    Transfer,
)
from ._paths import PathResolver, check_logical_path
from ._queue import (
    FleetJobQueue,
    GroupEvent,
    JobQueue,
    JobStatus,
    KafkaJobQueue,
    LocalJobQueue,
    get_job_queue_registry,
)
from ._reconcile import (
    GroupBy,
    GroupSpec,
    ReadyPredicate,
    ReconcileResult,
    all_expected_folds,
    all_folds,
    all_label_values,
    count_at_least,
    group_by,
    reconcile_once,
    run_reconcile_loop,
    single,
)
from ._storage import (
    FileStorage,
    GcsStorage,
    HttpsStorage,
    HttpStorage,
    LocalStorage,
    NativeStorage,
    S3Storage,
    Storage,
    TextWriter,
    get_storage_registry,
)
from ._specs import (
    decode_spec,
    encode_spec,
    group_event_id,
    job_name,
    spec_from_dict,
    spec_to_dict,
    task_key,
    validate_spec,
)

__provisional__ = ["JobQueue", "get_job_queue_registry"]

__all__ = [
    "AltarError", "JobStatus", "FileStorage", "GcsStorage", "HttpStorage", "HttpsStorage", "LocalStorage", "NativeStorage", "S3Storage", "Storage", "TextWriter", "get_storage_registry", "GroupBy", "GroupSpec", "InMemoryTaskLedger", "NativeTaskLedger", "PredicateError", "ReadyPredicate", "ReconcileResult", "RocksDBTaskLedger", "TaskLedger", "all_expected_folds", "all_folds", "all_label_values", "count_at_least", "group_by", "reconcile_once", "run_reconcile_loop", "single", "FleetJobQueue", "GroupEvent", "JobQueue", "KafkaJobQueue", "LocalJobQueue", "get_job_queue_registry", "BackendError", "CapabilityNotSupported", "Capacity", "ConfigError", "ContainerTaskSpec",
    "DigestMismatchError", "ExecutionBackend", "GpuPool", "InvalidArgument", "KubernetesExecutionBackend",
    "LocalDockerExecutionBackend", "ModalExecutionBackend", "NativeExecutionBackend", "NotFound",
    "PathEscapeError", "PathResolver", "PluginRegistry", "PluginRunIdentity", "ProcessExecutionBackend",
    "ReconcileStalled", "ResourceRequest", "TaskFailure", "TaskHandle", "TaskRecord", "TaskState", "TaskStatus",
    "Transfer", "TransferIntegrityError", "TransportError", "check_logical_path", "decode_spec",
    "digest_verifier_program", "encode_spec", "file_digest", "get_execution_backend_registry", "group_event_id",
    "has_verification_record", "is_valid_digest", "job_name", "native_backend_names", "spec_from_dict", "spec_to_dict", "task_key",
    "validate_spec", "verification_record_path", "verify_file_digest", "verify_transfer_digest",
]
