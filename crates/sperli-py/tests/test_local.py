"""What needs no job: the module's names, the exception classes, and a
rank program started by hand."""

import subprocess
import sys

import pytest

import sperli


def test_names_as_mpi4py_spells_them():
    for name in ["SUM", "PROD", "MIN", "MAX", "LAND", "LOR", "LXOR", "BAND", "BOR", "BXOR"]:
        op = getattr(sperli, name)
        assert isinstance(op, sperli.Op) and op.name == name and repr(op) == f"sperli.{name}"
    assert sperli.SUM.code == 1 and sperli.BXOR.code == 10 and sperli.SUM != sperli.MAX
    assert sperli.DTYPES == (
        "uint8", "int32", "uint32", "int64", "uint64", "float32", "float64",
        "bool", "int8", "int16", "uint16", "complex64", "complex128",
    )
    assert sperli.ANY_TAG == -1 and sperli.ANY_SOURCE == -1
    assert repr(sperli.IN_PLACE) == "sperli.IN_PLACE"
    for cls in ["Send", "Recv", "Isend", "Irecv", "Sendrecv", "Bcast", "Reduce", "Allreduce",
                "Gather", "Scatter", "Allgather", "Alltoall", "Reduce_scatter_block", "Barrier",
                "send", "recv", "isend", "irecv", "bcast", "gather", "scatter", "allgather",
                "allreduce", "reduce", "barrier", "Abort", "Finalize", "Get_rank", "Get_size"]:
        assert getattr(sperli.Comm, cls).__doc__, cls
    st = sperli.Status()
    assert (st.source, st.tag, st.count) == (sperli.ANY_SOURCE, sperli.ANY_TAG, 0)


def test_exception_classes():
    assert issubclass(sperli.JobError, sperli.SperliError)
    assert issubclass(sperli.ArgumentError, sperli.SperliError)
    assert issubclass(sperli.TaskFailedError, sperli.SperliError)
    assert issubclass(sperli.SperliError, Exception)
    assert not sperli.is_initialized()


def test_a_script_started_by_hand_says_how_to_start_it():
    p = subprocess.run(
        [sys.executable, "-c", "import sperli; sperli.COMM_WORLD"],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
    )
    assert p.returncode != 0
    assert "sperli.SperliError: H1615 no job description" in p.stderr, p.stderr
    assert "sperli run -n N -- python3" in p.stderr, p.stderr


def test_the_job_description_never_reaches_python():
    # Nothing in the package holds it: its names are the API only.
    names = set(dir(sperli)) | set(dir(sperli.Comm))
    for word in ("secret", "description", "key", "token", "pem"):
        assert not any(word in n.lower() for n in names), word


def test_stubs_name_every_public_name():
    import ast
    import pathlib

    import sperli._sperli as native

    stub = pathlib.Path(native.__file__).with_name("_sperli.pyi")
    tree = ast.parse(stub.read_text())
    top, members = set(), {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            top.add(node.name)
            members[node.name] = {
                n.name for n in node.body if isinstance(n, ast.FunctionDef)
            } | {n.target.id for n in node.body if isinstance(n, ast.AnnAssign)}
        elif isinstance(node, (ast.AnnAssign, ast.Assign)):
            targets = [node.target] if isinstance(node, ast.AnnAssign) else node.targets
            top |= {t.id for t in targets if isinstance(t, ast.Name)}
    public = {n for n in dir(native) if not n.startswith("_")} | {"__version__"}
    assert public <= top, public - top
    for cls in ["Comm", "Request", "Status", "Checkpointer", "Mailbox", "MailboxServer", "Op"]:
        have = {n for n in dir(getattr(native, cls)) if not n.startswith("_")}
        assert have <= members[cls], (cls, have - members[cls])
