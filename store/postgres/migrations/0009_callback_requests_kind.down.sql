-- Back to one key per request id: of the rows sharing a request id across
-- kinds only the earliest is kept (the others could not be told apart).
DELETE FROM callback_requests c
 USING callback_requests k
 WHERE c.request_id = k.request_id
   AND (c.received_at, c.kind) > (k.received_at, k.kind);
ALTER TABLE callback_requests DROP CONSTRAINT callback_requests_pkey;
ALTER TABLE callback_requests ADD PRIMARY KEY (request_id);
