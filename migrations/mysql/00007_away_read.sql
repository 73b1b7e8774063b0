-- Away status and read markers.
-- A user's away message (NULL: not away) and when it was set stay until the
-- user clears it, across logins. read_marks: the newest direct message from
-- peer_id that user_id has read (its msg_seq): the peer's ✓✓.

-- +goose Up
ALTER TABLE users ADD COLUMN away_message VARCHAR(1024) NULL;
ALTER TABLE users ADD COLUMN away_us BIGINT NOT NULL DEFAULT 0;

CREATE TABLE read_marks (
    user_id  BIGINT NOT NULL,
    peer_id  BIGINT NOT NULL,
    read_seq BIGINT NOT NULL,
    PRIMARY KEY (user_id, peer_id),
    KEY ix_read_marks_peer (peer_id),
    CONSTRAINT fk_read_marks_user FOREIGN KEY (user_id) REFERENCES users (user_id),
    CONSTRAINT fk_read_marks_peer FOREIGN KEY (peer_id) REFERENCES users (user_id)
) ENGINE=InnoDB;

-- +goose Down
DROP TABLE read_marks;
ALTER TABLE users DROP COLUMN away_us;
ALTER TABLE users DROP COLUMN away_message;
