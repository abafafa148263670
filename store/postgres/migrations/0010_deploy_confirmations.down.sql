DROP TABLE deploy_confirmations;
