-- agentmaild's PostgreSQL schema, version 13 (SQLite schema 11): the message type 'interrupt'
-- (the mail an interrupt carries, mail.vocab.INTERRUPT_TYPE) joins the type CHECK.
ALTER TABLE messages DROP CONSTRAINT IF EXISTS messages_type_check;
ALTER TABLE messages ADD CONSTRAINT messages_type_check CHECK (type IN ('status','question','result','error','worker_done','worker_died','merge_ready','merged','merge_failed','escalation','health_check','dispatch','assign','decision_gate','interrupt'));
