# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""krpinglib - the krping command's package (tools/krping runs its cli).

One module per part, each importing only what it uses:
  abi         the module's tests, states and result file names
  errors      the CLI's errors, and what the kernel's errnos mean
  features    what a host's module accepts (its configfs features file)
  session     a session on this host (configfs and sysfs directly)
  remote      a session on another host, over one shared ssh connection
  settings    the session settings a command line asks for
  report      figures, the table, run outcome, per-QP, histograms, JSON
  watch       the live watch of a running benchmark (--interval, bar)
  thresholds  --max-*/--min-* limits and their checks
  prometheus  the Prometheus text format of results (show --prometheus)
  run         the run and pair commands
  commands    list, show, stop, reset and rm
  cli         the argument parser and main()
Nothing here needs more than python3's standard library.
"""
