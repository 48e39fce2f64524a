from mtl.bench import train


def test_train_report_covers_every_setting_and_states_the_targets():
    rows = []
    for label, overrides in train.SETTINGS:
        row = {
            "setting": label,
            "params": 1,
            "nli_ms": 150.0,
            "nli_pairs_s": 1.0,
            "squad_ms": 600.0,
            "squad_pairs_s": 1.0,
        }
        if "encoder=bilstm" in overrides[0]:
            row.update(nli_floor_ms=125.0, squad_floor_ms=500.0)
        rows.append(row)
    rows[1]["nli_ms"] = 5000.0  # bilstm 2048: 1.56x faster than 7.8 s, under the 1.8x target
    report = train.report(rows)
    assert (
        "BiLSTM-max 512 NLI step: 150 ms = 1.20x the LSTM floor, 3.8x faster than the original's 570 ms (meets"
        in report
    )
    assert "BiLSTM-max 2048 NLI step: 5000 ms" in report and "(MISSES targets" in report
    assert report.count("\n") == len(rows) + 3
