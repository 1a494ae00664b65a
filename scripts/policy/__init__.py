"""The gate's pure decision logic: config, capacity model, decision, plan. No I/O here."""
