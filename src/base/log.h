/*
 * log.h — leveled logging to stderr.
 *
 * Level comes from ea_log_set_level() or, if never set, from the environment
 * variable EAAS_LOG (error|warn|info|debug; default info). Lines look like
 *   eaas I 12:03:04.123 loaded 24 layers
 * Logging is thread-safe (one fprintf per line).
 */
#ifndef EA_LOG_H
#define EA_LOG_H

typedef enum { EA_LOG_ERROR = 0, EA_LOG_WARN = 1, EA_LOG_INFO = 2, EA_LOG_DEBUG = 3 } ea_log_level;

void ea_log_set_level(ea_log_level lvl);
ea_log_level ea_log_get_level(void);
/* Parse "error"/"warn"/"info"/"debug"; returns -1 if unknown. */
int ea_log_parse_level(const char *s);
void ea_log(ea_log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define EA_LOGE(...) ea_log(EA_LOG_ERROR, __VA_ARGS__)
#define EA_LOGW(...) ea_log(EA_LOG_WARN, __VA_ARGS__)
#define EA_LOGI(...) ea_log(EA_LOG_INFO, __VA_ARGS__)
#define EA_LOGD(...) ea_log(EA_LOG_DEBUG, __VA_ARGS__)

#endif
