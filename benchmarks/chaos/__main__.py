from benchmarks.chaos.cli import main

raise SystemExit(main())
