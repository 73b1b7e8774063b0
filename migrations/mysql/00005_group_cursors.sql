-- Group messages are stored once. A group's timeline is its messages in
-- msg_seq order; each member's delivery state is a cursor on it, not a row
-- per message: delivering to the members online at a node writes rows in
-- proportion to those members, whatever the group's size.
-- Rows of recipients written before this migration (one per member of a
-- group message) are delivered as they always were.

-- +goose Up
-- last_seq: the newest message of the group (0: none yet). A member joining
-- starts after it.
ALTER TABLE chat_groups ADD COLUMN last_seq BIGINT NOT NULL DEFAULT 0;
UPDATE chat_groups SET last_seq = COALESCE((SELECT MAX(m.msg_seq) FROM messages m WHERE m.to_group_id = chat_groups.group_id), 0);

-- acked_seq: the member has every message of the group up to here.
-- sent_seq: handed to one of the member's connections up to here
-- (>= acked_seq; back to acked_seq when the member logs in again).
-- until_seq: the member left the group; messages up to here (sent while a
-- member) still reach them, then the row goes.
CREATE TABLE group_cursors (
    group_id  BIGINT NOT NULL,
    user_id   BIGINT NOT NULL,
    acked_seq BIGINT NOT NULL,
    sent_seq  BIGINT NOT NULL,
    until_seq BIGINT NULL,
    PRIMARY KEY (group_id, user_id),
    KEY ix_group_cursors_user (user_id),
    KEY ix_group_cursors_acked (group_id, acked_seq),
    CONSTRAINT fk_group_cursors_group FOREIGN KEY (group_id) REFERENCES chat_groups (group_id),
    CONSTRAINT fk_group_cursors_user FOREIGN KEY (user_id) REFERENCES users (user_id)
) ENGINE=InnoDB;
INSERT INTO group_cursors (group_id, user_id, acked_seq, sent_seq, until_seq)
    SELECT gm.group_id, gm.user_id, g.last_seq, g.last_seq, NULL
    FROM group_members gm JOIN chat_groups g ON g.group_id = gm.group_id;

-- A user's pending rows, oldest first, without reading the delivered ones.
CREATE INDEX ix_recipients_pending ON recipients (user_id, delivered_us, msg_seq);

-- +goose Down
DROP INDEX ix_recipients_pending ON recipients;
DROP TABLE group_cursors;
ALTER TABLE chat_groups DROP COLUMN last_seq;
