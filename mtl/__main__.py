from mtl.cli import main

raise SystemExit(main())
