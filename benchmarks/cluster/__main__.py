from benchmarks.cluster.cli import main

raise SystemExit(main())
