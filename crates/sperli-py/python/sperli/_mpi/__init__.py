"""The parts of ``sperli.MPI`` (mpi4py's ``MPI`` module over the package),
one module per concern; ``sperli.MPI`` re-exports their public names.
Nothing here is imported on its own: importing ``sperli.MPI`` joins the
job."""
