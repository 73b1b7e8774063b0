-- Direct messages on timelines. A user's inbox is the direct messages to
-- them (messages.to_user_id) in msg_seq order, index ix_messages_to_user;
-- their delivery state is one cursor row, not a row per message, as for
-- groups (00005): storing a direct message writes its messages row only,
-- and a visit's marks and acknowledgements write one row per user.
-- The recipients table goes: its pending rows become positions of the
-- cursors (docs/ARCHITECTURE.md, "Direct messages on timelines").

-- +goose Up
-- acked_seq: the user has acknowledged every direct message up to here.
-- sent_seq: handed to a connection up to here (>= acked_seq).
-- sent_us: the stamp of the newest mark (MarkDeliveredRows).
-- back_us, back_seq: the last time the cursor moved back (a login's reset,
-- or marks undone): the newest stamp used before it, and where it went. A
-- later undo of an older mark then knows whether its messages were made
-- pending again in between.
CREATE TABLE inbox_cursors (
    user_id   BIGINT NOT NULL PRIMARY KEY,
    acked_seq BIGINT NOT NULL DEFAULT 0,
    sent_seq  BIGINT NOT NULL DEFAULT 0,
    sent_us   BIGINT NOT NULL DEFAULT 0,
    back_us   BIGINT NOT NULL DEFAULT 0,
    back_seq  BIGINT NOT NULL DEFAULT 0,
    CONSTRAINT fk_inbox_cursors_user FOREIGN KEY (user_id) REFERENCES users (user_id)
) ENGINE=InnoDB;

-- Direct messages acknowledged out of order: after the user's acked_seq,
-- behind one still unacknowledged. The row goes when acked_seq passes it.
CREATE TABLE inbox_acks (
    user_id BIGINT NOT NULL,
    msg_seq BIGINT NOT NULL,
    PRIMARY KEY (user_id, msg_seq),
    CONSTRAINT fk_inbox_acks_user FOREIGN KEY (user_id) REFERENCES users (user_id)
) ENGINE=InnoDB;

-- Every user's cursor stands just before their oldest direct message still
-- waiting (delivered or not: a message handed to a connection and not
-- acknowledged is pending again, as after a login), or at their newest
-- direct message when none waits.
INSERT INTO inbox_cursors (user_id, acked_seq, sent_seq, back_seq)
    SELECT x.user_id, x.a, x.a, x.a FROM (
        SELECT u.user_id, COALESCE(
            (SELECT MIN(r.msg_seq) - 1 FROM recipients r JOIN messages m ON m.msg_seq = r.msg_seq
             WHERE r.user_id = u.user_id AND m.to_user_id = u.user_id),
            (SELECT MAX(m.msg_seq) FROM messages m WHERE m.to_user_id = u.user_id),
            0) AS a
        FROM users u) x;

-- After the cursor, a direct message without its row was acknowledged out
-- of order.
INSERT INTO inbox_acks (user_id, msg_seq)
    SELECT m.to_user_id, m.msg_seq FROM messages m JOIN inbox_cursors c ON c.user_id = m.to_user_id
    WHERE m.msg_seq > c.acked_seq
      AND NOT EXISTS (SELECT 1 FROM recipients r WHERE r.user_id = m.to_user_id AND r.msg_seq = m.msg_seq);

-- Rows of group messages stored before 00005 (one per member) become
-- cursor positions: the member's cursor moves back to just before the
-- oldest (what came after it comes again: more, never less); a member who
-- left gets a cursor that ends at the last of them.
UPDATE group_cursors c JOIN (
        SELECT r.user_id, m.to_group_id AS group_id, MIN(r.msg_seq) AS lo
        FROM recipients r JOIN messages m ON m.msg_seq = r.msg_seq
        WHERE m.to_group_id IS NOT NULL GROUP BY r.user_id, m.to_group_id) l
    ON l.user_id = c.user_id AND l.group_id = c.group_id
    SET c.acked_seq = LEAST(c.acked_seq, l.lo - 1), c.sent_seq = LEAST(c.sent_seq, l.lo - 1);
INSERT INTO group_cursors (group_id, user_id, acked_seq, sent_seq, until_seq)
    SELECT l.group_id, l.user_id, l.lo - 1, l.lo - 1, l.hi FROM (
        SELECT r.user_id, m.to_group_id AS group_id, MIN(r.msg_seq) AS lo, MAX(r.msg_seq) AS hi
        FROM recipients r JOIN messages m ON m.msg_seq = r.msg_seq
        WHERE m.to_group_id IS NOT NULL GROUP BY r.user_id, m.to_group_id) l
    WHERE NOT EXISTS (SELECT 1 FROM group_cursors c WHERE c.group_id = l.group_id AND c.user_id = l.user_id);

DROP TABLE recipients;

-- +goose Down
CREATE TABLE recipients (
    user_id      BIGINT NOT NULL,
    msg_seq      BIGINT NOT NULL,
    delivered_us BIGINT NULL,
    PRIMARY KEY (user_id, msg_seq),
    KEY ix_recipients_msg (msg_seq),
    KEY ix_recipients_pending (user_id, delivered_us, msg_seq),
    CONSTRAINT fk_recipients_user FOREIGN KEY (user_id) REFERENCES users (user_id),
    CONSTRAINT fk_recipients_msg FOREIGN KEY (msg_seq) REFERENCES messages (msg_seq) ON DELETE CASCADE
) ENGINE=InnoDB;
INSERT INTO recipients (user_id, msg_seq)
    SELECT m.to_user_id, m.msg_seq FROM messages m JOIN inbox_cursors c ON c.user_id = m.to_user_id
    WHERE m.msg_seq > c.acked_seq
      AND NOT EXISTS (SELECT 1 FROM inbox_acks a WHERE a.user_id = m.to_user_id AND a.msg_seq = m.msg_seq);
DROP TABLE inbox_acks;
DROP TABLE inbox_cursors;
