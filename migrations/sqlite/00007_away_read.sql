-- Away status and read markers. Keep in step with ../mysql/00007_away_read.sql.

-- +goose Up
ALTER TABLE users ADD COLUMN away_message TEXT NULL;
ALTER TABLE users ADD COLUMN away_us INTEGER NOT NULL DEFAULT 0;

CREATE TABLE read_marks (
    user_id  INTEGER NOT NULL REFERENCES users (user_id),
    peer_id  INTEGER NOT NULL REFERENCES users (user_id),
    read_seq INTEGER NOT NULL,
    PRIMARY KEY (user_id, peer_id)
);
CREATE INDEX ix_read_marks_peer ON read_marks (peer_id);

-- +goose Down
DROP TABLE read_marks;
ALTER TABLE users DROP COLUMN away_us;
ALTER TABLE users DROP COLUMN away_message;
