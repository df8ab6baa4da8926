from benchmarks.attempt_cost.cli import main

raise SystemExit(main())
